// @ts-check
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { relative } from "node:path";
import { test } from "node:test";
import { GENERATED_FILE, fetchSpec, renderTypes } from "../scripts/openapi-types.mjs";
import { useServer } from "./helpers.js";

const live = useServer();

test("the checked-in types are what the live server's /openapi.json generates", async () => {
  const spec = await fetchSpec(live.server.url);
  const expected = await renderTypes(spec);
  const actual = await readFile(GENERATED_FILE, "utf8");
  if (actual === expected) return;
  const a = actual.split("\n");
  const e = expected.split("\n");
  let line = 0;
  while (line < Math.max(a.length, e.length) && a[line] === e[line]) line++;
  assert.fail(
    `${relative(process.cwd(), GENERATED_FILE)} has drifted from ${live.server.url}/openapi.json ` +
      `(first difference at line ${line + 1}: file has ${JSON.stringify(a[line] ?? "<end>")}, ` +
      `server gives ${JSON.stringify(e[line] ?? "<end>")}). Run \`npm run gen\` and commit the result.`,
  );
});

test("every operation in the document is reachable through a typed method or call()", async () => {
  const spec = await fetchSpec(live.server.url);
  const paths = /** @type {Record<string, Record<string, unknown>>} */ (spec.paths);
  const source = await readFile(GENERATED_FILE, "utf8");
  for (const [path, item] of Object.entries(paths)) {
    for (const method of Object.keys(item)) {
      assert.ok(
        ["get", "post"].includes(method),
        `${method.toUpperCase()} ${path}: the client sends GET and POST only`,
      );
    }
    assert.ok(source.includes(`${JSON.stringify(path)}: {`), `${path} is in the generated paths`);
  }
});
