// Runs one SQL query with DuckDB (@duckdb/node-api), in the directory it
// is started in, and prints its rows as a JSON array on stdout: the README's
// queries, run by the tests the way a user would run them. The package is
// loaded from the node_modules directory in AUGMENT_DUCKDB_NODE_MODULES.
//
// usage: AUGMENT_DUCKDB_NODE_MODULES=<node_modules> node duckdb_query.mjs '<sql>'
import { createRequire } from 'node:module';
import path from 'node:path';

const modules = process.env.AUGMENT_DUCKDB_NODE_MODULES;
const sql = process.argv[2];
if (!modules || !sql) {
  console.error("usage: AUGMENT_DUCKDB_NODE_MODULES=<node_modules> node duckdb_query.mjs '<sql>'");
  process.exit(2);
}
// Resolve the package from the given node_modules, not from this file.
const require = createRequire(path.join(path.resolve(modules), '..', 'resolver.js'));
const { DuckDBInstance } = require('@duckdb/node-api');

const conn = await (await DuckDBInstance.create(':memory:')).connect();
const rows = (await conn.runAndReadAll(sql)).getRowObjectsJson();
process.stdout.write(JSON.stringify(rows));
