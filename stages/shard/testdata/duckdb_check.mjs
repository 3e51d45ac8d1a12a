// duckdb_check.mjs opens an augment shard with DuckDB (@duckdb/node-api)
// the way a data engineer would, checks that the nested columns are real
// lists of structs, and prints what DuckDB sees as one JSON object on stdout
// so the Go test (TestDuckDB) can compare it with the records written.
//
// usage: AUGMENT_DUCKDB_NODE_MODULES=/path/to/node_modules node duckdb_check.mjs shard.parquet
// Exit status 1 (message on stderr) when the shard's shape is wrong or a
// query fails.
import { createRequire } from 'node:module';
import path from 'node:path';

const modules = process.env.AUGMENT_DUCKDB_NODE_MODULES;
const shard = process.argv[2];
if (!modules || !shard) {
  console.error('usage: AUGMENT_DUCKDB_NODE_MODULES=<node_modules> node duckdb_check.mjs <shard.parquet>');
  process.exit(2);
}
// Resolve the package from the given node_modules, not from this file.
const require = createRequire(path.join(path.resolve(modules), '..', 'resolver.js'));
const { DuckDBInstance } = require('@duckdb/node-api');

const conn = await (await DuckDBInstance.create(':memory:')).connect();
const src = `read_parquet('${shard.replaceAll("'", "''")}', file_row_number = true)`;
const rows = async (sql) => (await conn.runAndReadAll(sql)).getRowObjectsJson();

const failures = [];
const types = {};
for (const r of await rows(`DESCRIBE SELECT * EXCLUDE (file_row_number) FROM ${src}`)) {
  types[r.column_name] = r.column_type;
}
for (const col of ['tools', 'messages', 'tags', 'lineage']) {
  const t = types[col] ?? '';
  if (!t.startsWith('STRUCT(') || !t.endsWith(')[]')) {
    failures.push(`${col} is ${t || 'missing'}, want STRUCT(...)[]`);
  }
}

const out = {
  types,
  records: await rows(`
    SELECT id, "row"::VARCHAR AS "row", len(messages)::INTEGER AS messages,
           map_from_entries(tags) AS tags, map_from_entries(tags)['lang'] AS lang,
           [s.stage || '/' || s.provider || '/' || s.model FOR s IN lineage] AS lineage
    FROM ${src} ORDER BY file_row_number`),
  messages: await rows(`
    SELECT file_row_number::INTEGER AS rec, i::INTEGER AS i, m.role, m.content, m.reasoning,
           len(m.calls)::INTEGER AS calls, [r.content FOR r IN m.results] AS results
    FROM (SELECT file_row_number, generate_subscripts(messages, 1) AS i, unnest(messages) AS m FROM ${src})
    ORDER BY rec, i`),
  calls: await rows(`
    SELECT rec::INTEGER AS rec, i::INTEGER AS i, j::INTEGER AS j, c.name, c.arguments::VARCHAR AS arguments,
           json_valid(c.arguments) AS valid
    FROM (SELECT rec, i, generate_subscripts(m.calls, 1) AS j, unnest(m.calls) AS c
          FROM (SELECT file_row_number AS rec, generate_subscripts(messages, 1) AS i, unnest(messages) AS m FROM ${src}))
    ORDER BY rec, i, j`),
  tools: await rows(`
    SELECT rec::INTEGER AS rec, i::INTEGER AS i, t.name, t.description, t.parameters::VARCHAR AS parameters,
           t.response::VARCHAR AS response, json_extract_string(t.parameters, '$.type') AS type
    FROM (SELECT file_row_number AS rec, generate_subscripts(tools, 1) AS i, unnest(tools) AS t FROM ${src})
    ORDER BY rec, i`),
  compression: (await rows(`SELECT DISTINCT compression FROM parquet_metadata('${shard.replaceAll("'", "''")}') ORDER BY 1`))
    .map((r) => r.compression),
};
if (failures.length > 0) {
  console.error(failures.join('\n'));
  process.exit(1);
}
console.log(JSON.stringify(out));
