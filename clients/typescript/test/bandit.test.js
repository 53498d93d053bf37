// @ts-check
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { PlauditHttpError } from "@plaudit/client";
import { rejection, unique, useServer } from "./helpers.js";

const live = useServer();

/** Three arms whose names no other run uses; the tool's name is what a tool call must say. */
function freshArms() {
  const tool = unique("Bash");
  const file = `${unique("docs")}/guide.md`;
  const skill = unique("coding").replace(/-/g, "");
  return {
    tool,
    file,
    skill,
    arms: [
      { id: `tool:exec:${tool}`, tokens: 300 },
      { id: `skill:${skill}:main`, tokens: 500 },
      { id: `file:workspace:${file}`, tokens: 4000 },
    ],
  };
}

/** @param {import("@plaudit/client").Posteriors} p */
function byId(p) {
  return new Map(p.arms.map((a) => [a.id, a]));
}

describe("bandit", () => {
  test("runs lists a session's runs newest first, paged by limit and offset", async () => {
    const c = live.client;
    const { arms } = freshArms();
    const session_id = unique("session");
    const made = [];
    for (let i = 0; i < 3; i++) {
      made.push((await c.bandit.select({ arms, token_budget: 400, session_id, seed: i })).run_id);
    }
    const all = await c.bandit.runs({ session_id });
    assert.deepEqual(
      all.runs.map((r) => r.run_id),
      made.slice().reverse(),
    );
    const page = await c.bandit.runs({ session_id, limit: 1, offset: 1 });
    assert.deepEqual(
      page.runs.map((r) => r.run_id),
      [made[1]],
    );
    const sel = await c.bandit.select({ arms, token_budget: 400, session_id, seed: 9 });
    assert.ok(sel.excluded.length > 0 && sel.guidance?.includes("components were left out"));
  });

  test("select then observe moves each included arm's posterior the way its reward says", async () => {
    const c = live.client;
    const { tool, file, arms } = freshArms();
    const context = unique("ctx");

    const sel = await c.bandit.select({ arms, token_budget: 10_000, context, seed: 7 });
    assert.equal(typeof sel.run_id, "string");
    assert.equal(sel.context, context);
    assert.deepEqual(new Set([...sel.included, ...sel.excluded]), new Set(arms.map((a) => a.id)));
    const tokens = new Map(arms.map((a) => [a.id, a.tokens]));
    assert.equal(
      sel.used_tokens,
      sel.included.reduce((sum, id) => sum + (tokens.get(id) ?? NaN), 0),
    );
    assert.ok(sel.used_tokens <= sel.budget);
    assert.ok(sel.included.length > 0, "a 10,000-token budget fits some of 4,800 tokens of arms");

    const before = byId(await c.bandit.posteriors({ context }));
    // The output names the file and calls the tool; the skill's category is never mentioned.
    const report = {
      run_id: sel.run_id,
      output_text: `Edited ${file} and ran the tests.`,
      tool_calls: [{ name: tool, arguments: { cmd: "npm test" } }],
      usage_tokens: 1234,
      duration_ms: 56.5,
    };
    const obs = await c.bandit.observe(report);
    assert.equal(obs.status, "appended");
    assert.equal(obs.updated, true);
    assert.deepEqual(Object.keys(obs.rewards).sort(), [...sel.included].sort());

    const after = byId(await c.bandit.posteriors({ context }));
    for (const id of sel.included) {
      const was = before.get(id);
      const now = after.get(id);
      assert.ok(was && now, `${id} has a posterior in ${context}`);
      const expected = id.startsWith("skill:") ? 0 : 1;
      assert.equal(obs.rewards[id], expected, `reward of ${id}`);
      assert.equal(now.pulls, was.pulls + 1, `pulls of ${id}`);
      if (expected === 1) assert.ok(now.mean > was.mean, `${id} was used: its mean rises`);
      else assert.ok(now.mean < was.mean, `${id} was not used: its mean falls`);
    }

    // The run remembers its observation, and sending it again changes nothing.
    const run = await c.bandit.run(sel.run_id);
    assert.equal(run.run_id, sel.run_id);
    assert.deepEqual(run.observation?.rewards, obs.rewards);
    const again = await c.bandit.observe(report);
    assert.equal(again.status, "present");
    assert.deepEqual(byId(await c.bandit.posteriors({ context })), after);
  });

  test("registered arms are listed, shown and selected without being sent again", async () => {
    const c = live.client;
    const { arms } = freshArms();
    const reg = await c.bandit.registerArms(arms);
    assert.equal(reg.registered, 3);
    assert.deepEqual(
      reg.ids,
      arms.map((a) => a.id),
    );

    const listed = new Set((await c.bandit.arms()).map((a) => a.id));
    for (const a of arms) assert.ok(listed.has(a.id), `${a.id} is listed`);

    const fileArm = arms[2];
    assert.ok(fileArm);
    const detail = await c.bandit.arm(fileArm.id); // its id holds a "/" and ":"s: path-encoded
    assert.equal(detail.arm.id, fileArm.id);
    assert.equal(detail.arm.tokens, 4000);
    assert.equal(detail.global.pulls, 0);

    const context = unique("ctx");
    const sel = await c.bandit.select({ token_budget: 1_000_000, context, seed: 1 });
    for (const a of arms) assert.ok(sel.included.includes(a.id) || sel.excluded.includes(a.id));
    assert.ok(!(await c.bandit.contexts()).includes(context), "a context is listed once observed");
    await c.bandit.observe({ run_id: sel.run_id, output_text: "nothing used" });
    assert.ok((await c.bandit.contexts()).includes(context));
  });

  test("history, savings and config answer in their documented shapes", async () => {
    const c = live.client;
    const { tool, arms } = freshArms();
    const context = unique("ctx");
    const sel = await c.bandit.select({ arms, token_budget: 10_000, context, seed: 3 });
    await c.bandit.observe({ run_id: sel.run_id, tool_calls: [{ name: tool }], usage_tokens: 900 });

    const toolId = `tool:exec:${tool}`;
    const inContext = await c.bandit.history({ arm_id: toolId, context });
    assert.equal(inContext.context, context);
    assert.equal(inContext.arms[toolId]?.length, 1, "one observation, one point");
    const global = (await c.bandit.history({ arm_id: toolId })).arms[toolId];
    assert.ok(global && global.length === 1);
    const posterior = byId(await c.bandit.posteriors()).get(toolId);
    assert.equal(global[0]?.mean, posterior?.mean, "the last point is the current posterior");

    const savings = await c.bandit.savings({ context });
    assert.equal(savings.selected_runs + savings.baseline_runs, 1);
    assert.equal(sel.is_baseline ? savings.baseline_avg_tokens : savings.selected_avg_tokens, 900);

    const config = await c.bandit.config();
    assert.equal(typeof config.threshold, "number");
  });

  test("observing an unknown run is a 404, a different outcome for a run a 409", async () => {
    const c = live.client;
    const missing = await rejection(c.bandit.observe({ run_id: unique("no-such-run") }));
    assert.ok(missing instanceof PlauditHttpError);
    assert.equal(missing.status, 404);
    assert.equal(missing.kind, "NotFoundError");

    const { arms } = freshArms();
    const sel = await c.bandit.select({ arms, token_budget: 10_000, context: unique("ctx") });
    await c.bandit.observe({ run_id: sel.run_id, output_text: "first" });
    const conflict = await rejection(c.bandit.observe({ run_id: sel.run_id, output_text: "second" }));
    assert.ok(conflict instanceof PlauditHttpError);
    assert.equal(conflict.status, 409);
    assert.equal(conflict.kind, "ConflictError");
    assert.match(conflict.message, /already observed/);
  });
});
