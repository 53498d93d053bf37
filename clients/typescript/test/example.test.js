// @ts-check
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { useServer } from "./helpers.js";

const live = useServer();
const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), "..", "build", "examples", "agent-loop.js");
const run = promisify(execFile);

test("the agent-loop example runs against the server and leaves its trace", async () => {
  assert.ok(existsSync(EXAMPLE), `${EXAMPLE} is built by \`npm test\` (tsc -p tsconfig.examples.json)`);
  const c = live.client;
  const [score, summary] = [await c.ledger.score(), await c.signals.summary()];

  const rounds = 6;
  const env = { ...process.env, PLAUDIT_URL: live.server.url, PLAUDIT_TOKEN: live.server.token ?? "" };
  const { stdout } = await run(process.execPath, [EXAMPLE, String(rounds)], { env, timeout: 60_000 });

  assert.equal(stdout.match(/^round /gm)?.length, rounds, stdout);
  assert.match(stdout, /^log verified: \d+ events/m);
  // What the bandit learnt: each kind of task rates the tool it uses above the one it never calls.
  const means = (/** @type {string} */ kind) =>
    new Map(
      (stdout.match(new RegExp(`^${kind}: (.*)$`, "m"))?.[1] ?? "")
        .split(", ")
        .map((item) => /** @type {[string, number]} */ ([item.split(" ")[0], Number(item.split(" ")[1])])),
    );
  const code = means("code");
  const research = means("research");
  assert.ok((code.get("tool:exec:Bash") ?? 0) > (code.get("tool:web:WebSearch") ?? 1), stdout);
  assert.ok((research.get("tool:web:WebSearch") ?? 0) > (research.get("tool:exec:Bash") ?? 1), stdout);

  const after = await c.ledger.score();
  assert.equal(after.transactions, score.transactions + rounds, "one ledger record per round");
  const afterSummary = await c.signals.summary();
  assert.equal(afterSummary.counts.decisions, summary.counts.decisions + rounds, "one decision per round");
  assert.equal(afterSummary.counts.outcomes, summary.counts.outcomes + rounds, "one outcome per round");
});

test("the example exits 2 with a usage line on a bad argument", async () => {
  const err = await run(process.execPath, [EXAMPLE, "many"]).then(
    () => assert.fail("should exit non-zero"),
    (e) => e,
  );
  assert.equal(err.code, 2);
  assert.match(err.stderr, /rounds must be a positive integer, not many/);
});
