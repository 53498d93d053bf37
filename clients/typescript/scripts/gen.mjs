// @ts-check
/**
 * `npm run gen`: regenerate src/generated/openapi.ts from a live server's /openapi.json.
 * Uses PLAUDIT_URL when set; otherwise starts its own `plaudit serve` (see plaudit-server.mjs)
 * and stops it afterwards.
 */
import { readFile, writeFile } from "node:fs/promises";
import { relative } from "node:path";
import { GENERATED_FILE, fetchSpec, renderTypes } from "./openapi-types.mjs";
import { liveServer } from "./plaudit-server.mjs";

const server = await liveServer();
try {
  const text = await renderTypes(await fetchSpec(server.url));
  const before = await readFile(GENERATED_FILE, "utf8").catch(() => null);
  const where = relative(process.cwd(), GENERATED_FILE);
  if (before === text) {
    console.log(`${where} is already current with ${server.url}/openapi.json`);
  } else {
    await writeFile(GENERATED_FILE, text);
    console.log(`${where} regenerated from ${server.url}/openapi.json; run npm test, then commit it`);
  }
} finally {
  await server.stop();
}
