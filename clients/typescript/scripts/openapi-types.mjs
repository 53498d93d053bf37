// @ts-check
/**
 * Renders plaudit's OpenAPI document as TypeScript. One function, used by `npm run gen` to
 * write src/generated/openapi.ts and by the drift test to check that file is current.
 */
import openapiTS, { astToString } from "openapi-typescript";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const GENERATED_FILE = join(
  resolve(dirname(fileURLToPath(import.meta.url)), ".."),
  "src",
  "generated",
  "openapi.ts",
);

const HEADER = `/**
 * plaudit's HTTP API as TypeScript types, generated from the server's /openapi.json by
 * openapi-typescript. Do not edit: run \`npm run gen\` (see README.md) to regenerate.
 */

`;

/**
 * @param {Record<string, unknown>} spec  a parsed /openapi.json
 * @returns {Promise<string>}
 */
export async function renderTypes(spec) {
  // defaultNonNullable off: a field the server fills in by default stays optional in a request,
  // as it is on the wire. alphabetize: the output does not depend on the order routes were
  // mounted in, so endpoints added on different branches regenerate without reordering noise.
  const options = { alphabetize: true, defaultNonNullable: false };
  const ast = await openapiTS(/** @type {any} */ (spec), options);
  return HEADER + astToString(ast);
}

/**
 * @param {string} baseUrl
 * @returns {Promise<Record<string, unknown>>}
 */
export async function fetchSpec(baseUrl) {
  const url = `${baseUrl}/openapi.json`;
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url} answered ${res.status}: ${(await res.text()).slice(0, 500)}`);
  return /** @type {Record<string, unknown>} */ (await res.json());
}
