// @ts-check
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { PlauditHttpError } from "@plaudit/client";
import { rejection, unique, useServer } from "./helpers.js";

const live = useServer();

describe("ledger", () => {
  test("a recorded reward and penalty change the score by their points", async () => {
    const c = live.client;
    const before = await c.ledger.score();

    const reward = await c.ledger.record({
      category: "successful_validation",
      action: "tests pass",
      key: unique("k"),
    });
    assert.equal(reward.status, "appended");
    assert.equal(reward.type, "reward");
    assert.ok(reward.points > 0);
    const mid = await c.ledger.score();
    assert.equal(mid.total_score, before.total_score + reward.points);
    assert.equal(mid.rewards_total, before.rewards_total + reward.points);
    assert.equal(mid.transactions, before.transactions + 1);
    assert.equal(reward.running_total, mid.total_score);

    const penalty = await c.ledger.record({
      category: "validation_failure",
      action: "tests fail",
      points: -7,
    });
    assert.equal(penalty.type, "penalty");
    assert.equal(penalty.points, -7);
    const after = await c.ledger.score();
    assert.equal(after.total_score, mid.total_score - 7);
    assert.equal(after.penalties_total, mid.penalties_total - 7);
    assert.equal(after.verified, true);
    assert.equal(penalty.running_total, after.total_score);
  });

  test("recording the same key twice is one transaction", async () => {
    const c = live.client;
    const key = unique("retry");
    const first = await c.ledger.record({ category: "pattern_reuse", action: "reused a helper", key });
    const score = await c.ledger.score();
    const second = await c.ledger.record({ category: "pattern_reuse", action: "reused a helper", key });
    assert.equal(second.status, "present");
    assert.equal(second.id, key);
    assert.equal(second.seq, first.seq);
    assert.deepEqual(await c.ledger.score().then((s) => [s.total_score, s.transactions]), [
      score.total_score,
      score.transactions,
    ]);
    const newest = await c.ledger.transactions({ limit: 5, category: "pattern_reuse" });
    assert.equal(newest.filter((t) => t.id === key).length, 1);
  });

  test("a batch is all or nothing: one bad item records none", async () => {
    const c = live.client;
    const before = await c.ledger.score();
    const key = unique("batch");
    const err = await rejection(
      c.ledger.recordBatch([
        { category: "successful_validation", action: "fine", key },
        { category: "no_such_category", action: "bad" },
      ]),
    );
    assert.ok(err instanceof PlauditHttpError);
    assert.equal(err.status, 422);
    assert.equal(err.kind, "ValidationError");
    assert.equal(err.body.where, "[1]");
    assert.equal(err.body.field, "category");
    assert.match(err.message, /no_such_category/);
    assert.deepEqual((await c.ledger.score()).total_score, before.total_score);

    const ok = await c.ledger.recordBatch([
      { category: "successful_validation", action: "fine", key },
      { category: "pattern_reuse", action: "also fine" },
    ]);
    assert.equal(ok.recorded, 2);
    assert.equal(ok.transactions[0]?.status, "appended", "the first attempt left no trace of the key");
    const sum = ok.transactions.reduce((s, t) => s + t.points, 0);
    assert.equal((await c.ledger.score()).total_score, before.total_score + sum);
  });

  test("verify, sessions, metrics and progress reflect what was recorded", async () => {
    const c = live.client;
    const label = unique("session");
    const session = await c.ledger.startSession({ label });
    assert.equal(session.open, true);
    assert.equal(session.label, label);
    const t = await c.ledger.record({ category: "successful_validation", action: "in a session" });
    assert.equal(t.session_id, session.session_id);
    const score = await c.ledger.score();
    assert.equal(score.session_id, session.session_id);
    assert.equal(score.session_score, t.points);
    const ended = await c.ledger.endSession({ session: session.session_id });
    assert.equal(ended.open, false);
    assert.equal(ended.score, t.points);
    assert.ok((await c.ledger.sessions()).some((s) => s.session_id === session.session_id && !s.open));

    const verification = await c.ledger.verify({ full: true });
    assert.equal(verification.ok, true);
    assert.equal(verification.log.ok, true);
    assert.equal(verification.transactions, score.transactions);

    const metrics = await c.ledger.metrics();
    assert.equal(typeof metrics.actions_total, "number");
    const progress = await c.ledger.progress();
    assert.equal(typeof progress, "object");
  });

  test("an unknown category is a 422 naming the category and the known ones", async () => {
    const err = await rejection(live.client.ledger.record({ category: "made_up", action: "x" }));
    assert.ok(err instanceof PlauditHttpError);
    assert.equal(err.status, 422);
    assert.equal(err.body.field, "category");
    assert.match(err.body.message, /unknown category 'made_up' \(known: .*successful_validation/);
  });
});
