// Renders a chat template with @huggingface/jinja (the Jinja implementation
// of transformers.js), for the export's tools_placement: role test. Reads
// {"template", "messages", "add_generation_prompt", "bos_token"} as JSON on
// stdin and writes the rendered text to stdout. The package is loaded from
// the node_modules directory in AUGMENT_JINJA_NODE_MODULES.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const modules = process.env.AUGMENT_JINJA_NODE_MODULES;
if (!modules) {
  console.error("AUGMENT_JINJA_NODE_MODULES is not set");
  process.exit(2);
}
const { Template } = await import(pathToFileURL(join(modules, "@huggingface", "jinja", "dist", "index.js")).href);
const input = JSON.parse(readFileSync(0, "utf8"));
const template = new Template(input.template);
process.stdout.write(
  template.render({
    messages: input.messages,
    add_generation_prompt: input.add_generation_prompt,
    bos_token: input.bos_token,
  }),
);
