// @ts-check
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { useServer } from "./helpers.js";

const live = useServer();
const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
const TSC = join(ROOT, "node_modules", "typescript", "bin", "tsc");
const run = promisify(execFile);
const work = mkdtempSync(join(tmpdir(), "plaudit-package-"));
after(() => rmSync(work, { recursive: true, force: true }));

/**
 * The agent loop of a markdown file: the ```ts block after its `<!-- agent-loop -->` marker.
 * @param {string} path
 */
function agentLoop(path) {
  const text = readFileSync(path, "utf8");
  const block = text.split("<!-- agent-loop -->")[1]?.match(/```ts\n([\s\S]*?)```/)?.[1];
  assert.ok(block, `${path} has the agent loop after <!-- agent-loop -->`);
  return block;
}

/** The README's loop, which docs/typescript.md shows too, word for word. */
function readmeLoop() {
  const loop = agentLoop(join(ROOT, "README.md"));
  assert.equal(agentLoop(join(ROOT, "..", "..", "docs", "typescript.md")), loop);
  return loop;
}

test("npm pack makes a package a fresh project installs, compiles the README's loop against and runs", async () => {
  // --ignore-scripts: `npm test` built dist/ already (`prepare` would build it again)
  const packed = await run("npm", ["pack", "--json", "--ignore-scripts", "--pack-destination", work], {
    cwd: ROOT,
  });
  const [{ filename, files }] = JSON.parse(packed.stdout);
  const paths = files.map((/** @type {{ path: string }} */ f) => f.path);
  for (const path of ["dist/index.js", "dist/index.d.ts", "dist/bandit.d.ts", "README.md", "package.json"]) {
    assert.ok(paths.includes(path), `the package holds ${path}`);
  }
  assert.ok(!paths.some((/** @type {string} */ p) => p.startsWith("test/")), "no tests in the package");

  const app = join(work, "agent");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "agent", private: true, type: "module" }));
  // No runtime dependencies, so the tarball installs without the registry.
  await run("npm", ["install", "--offline", "--no-audit", "--no-fund", join(work, filename)], { cwd: app });
  const tsconfig = {
    compilerOptions: {
      target: "ES2022",
      module: "NodeNext",
      moduleResolution: "NodeNext",
      lib: ["ES2022", "DOM"],
      types: [],
      strict: true,
      skipLibCheck: false, // the package's .d.ts files are checked too
      outDir: "out",
    },
    files: ["agent.ts"],
  };
  writeFileSync(join(app, "tsconfig.json"), JSON.stringify(tsconfig));
  writeFileSync(join(app, "agent.ts"), readmeLoop());
  await run(process.execPath, [TSC, "-p", "tsconfig.json"], { cwd: app });

  const c = live.client;
  const before = await c.ledger.score();
  const env = { ...process.env, PLAUDIT_URL: live.server.url, PLAUDIT_TOKEN: live.server.token ?? "" };
  const { stdout } = await run(process.execPath, [join(app, "out", "agent.js")], { cwd: app, env });
  assert.equal(stdout.match(/^round \d: used /gm)?.length, 3, stdout);
  assert.match(stdout, /tool:exec:Bash/, "the model's Bash call rewards the Bash tool");
  const after = await c.ledger.score();
  assert.equal(after.transactions, before.transactions + 3, "one ledger record per round");
});

test("a call's traceparent reaches the events it writes", async () => {
  const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  const c = live.client;
  const tx = await c.ledger.record(
    { category: "successful_validation", action: "traced", key: `traced-${Date.now()}` },
    { traceparent },
  );
  const event = await c.log.event(tx.id);
  assert.deepEqual(event.meta, { traceparent });
});
