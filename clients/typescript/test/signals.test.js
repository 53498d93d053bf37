// @ts-check
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { PlauditHttpError } from "@plaudit/client";
import { rejection, unique, useServer } from "./helpers.js";

const live = useServer();

/**
 * A decision for `task`.
 * @param {string} decisionId
 * @param {string} task
 */
function decisionOf(decisionId, task) {
  return {
    decision_id: decisionId,
    chosen_task: task,
    confidence: 0.8,
    user_intent: "fix the login bug",
    candidates: [task, "write-docs"],
  };
}

/**
 * Emits one decision and its outcome for a task name no other run uses.
 * @param {import("@plaudit/client").PlauditClient} c
 * @param {"success" | "partial" | "failure" | "wasted"} outcome
 */
async function emitPair(c, outcome = "success") {
  const decisionId = unique("d");
  const task = unique("task");
  const decision = await c.signals.decision(decisionOf(decisionId, task));
  const result = await c.signals.outcome({
    decision_id: decisionId,
    outcome,
    task_executed: task,
    time_to_resolution_ms: 1200,
  });
  return { decisionId, task, decision, result };
}

describe("signals", () => {
  test("an emitted decision and outcome show up in the summary and in an export", async (t) => {
    const c = live.client;
    const before = await c.signals.summary();
    const { decisionId, task, decision, result } = await emitPair(c);
    assert.equal(decision.status, "appended");
    assert.equal(decision.type, "flow.router.decision.v1");
    assert.equal(decision.decision_id, decisionId);
    assert.equal(result.type, "flow.router.outcome.v1");

    const summary = await c.signals.summary();
    assert.equal(summary.counts.decisions, before.counts.decisions + 1);
    assert.equal(summary.counts.joined_rows, before.counts.joined_rows + 1);
    assert.equal(summary.distributions.chosen_tasks[task], 1);

    const outputDir = unique("export");
    let exported;
    try {
      exported = await c.signals.export({ output_dir: outputDir, val_percent: 0, test_percent: 0 });
    } catch (err) {
      // A server given by PLAUDIT_URL may have no export root: say so instead of failing.
      if (!live.server.spawned && err instanceof PlauditHttpError && err.kind === "ConfigError") {
        t.skip(`server-side exports are off on ${live.server.url}: ${err.body.message}`);
        return;
      }
      throw err;
    }
    assert.equal(exported.counts.decisions, summary.counts.decisions);
    assert.equal(exported.distributions.chosen_tasks[task], 1);
    assert.equal(exported.counts.train_rows, exported.counts.joined_rows, "everything goes to train");

    if (live.server.exportRoot) {
      const train = join(live.server.exportRoot, outputDir, "train.jsonl");
      assert.ok(existsSync(train), `${train} was written`);
      const rows = readFileSync(train, "utf8")
        .trim()
        .split("\n")
        .map((line) => JSON.parse(line));
      const row = rows.find((r) => JSON.stringify(r).includes(decisionId));
      assert.ok(row, `the decision ${decisionId} is a training row`);
      assert.ok(JSON.stringify(row).includes(task));
    }
  });

  test("emitting the same decision again is idempotent; an override is recorded", async () => {
    const c = live.client;
    const { decisionId, task } = await emitPair(c, "failure");
    const again = await c.signals.decision(decisionOf(decisionId, task));
    assert.equal(again.status, "present");

    const before = await c.signals.summary();
    const override = await c.signals.override({
      decision_id: decisionId,
      original_task: task,
      override_task: "write-docs",
      reason: "the user wanted docs",
    });
    assert.equal(override.type, "flow.router.override.v1");
    assert.equal((await c.signals.summary()).counts.overrides, before.counts.overrides + 1);
  });

  test("the audit and the gates judge the same counts", async () => {
    const c = live.client;
    await emitPair(c, "partial");
    const summary = await c.signals.summary();
    const gates = await c.signals.gates();
    const minDecisions = gates.gates.find((g) => g.name === "min_decisions");
    assert.ok(minDecisions);
    assert.equal(minDecisions.actual, summary.counts.decisions);
    assert.equal(minDecisions.passed, summary.counts.decisions >= minDecisions.threshold);

    // Audit a summary sent in the request, with a threshold it meets and one it cannot.
    const audit = await c.signals.audit({ summary, min_decisions: 1, min_joined: 1_000_000 });
    assert.equal(audit.gates.min_decisions?.actual, summary.counts.decisions);
    assert.equal(audit.gates.min_decisions?.pass, true);
    assert.equal(audit.gates.min_joined?.pass, false);
    assert.equal(audit.pass, false);
  });

  test("evaluate estimates a table policy from logged propensities; code is refused", async () => {
    const c = live.client;
    // Tasks no other test uses, so the estimate below only sees these decisions' tasks.
    const good = unique("good");
    const poor = unique("poor");
    for (let i = 0; i < 8; i++) {
      const decisionId = unique("d");
      const task = i % 4 === 0 ? good : poor;
      await c.signals.decision({
        ...decisionOf(decisionId, task),
        candidates: [good, poor],
        propensity: task === good ? 0.25 : 0.75,
      });
      await c.signals.outcome({
        decision_id: decisionId,
        outcome: task === good ? "success" : "failure",
        task_executed: task,
      });
    }
    const result = await c.signals.evaluate({
      policy: { default: { [good]: 1 } },
      bootstrap: 100,
      min_propensity_coverage: 0,
    });
    assert.equal(result.policy.kind, "table");
    assert.ok(result.counts.evaluated >= 8, "the decisions above were evaluated");
    assert.ok(result.estimates.snips, "SNIPS is defined: the candidate picks a logged task");
    assert.ok(result.estimates.dr?.ci, "DR comes with an interval");
    assert.equal(result.gates.min_propensity_coverage?.pass, true);

    // A module:function string is never imported from a request: 422 on the body's policy.
    const err = await rejection(c.signals.evaluate({ policy: /** @type {any} */ ("os:system") }));
    assert.ok(err instanceof PlauditHttpError);
    assert.equal(err.status, 422);
    assert.ok(err.problems.some((p) => p.field === "body.policy"));
  });

  test("a confidence outside [0, 1] is a 422 naming the field", async () => {
    const err = await rejection(
      live.client.signals.decision({
        decision_id: unique("d"),
        chosen_task: "x",
        confidence: 1.5,
        user_intent: "",
      }),
    );
    assert.ok(err instanceof PlauditHttpError);
    assert.equal(err.status, 422);
    assert.deepEqual(
      err.problems.map((p) => p.field),
      ["body.confidence"],
    );
  });
});
