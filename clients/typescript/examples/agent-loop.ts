/**
 * An agent loop wired to plaudit: each task is routed (router signals), its prompt is built from
 * the components the context bandit selects within a token budget, the run is reported back so
 * the bandit learns which components earn their tokens, and the result is scored in the reward
 * ledger. At the end the loop prints the score, what the bandit has learnt and the log's state.
 *
 *   plaudit serve &                      # or PLAUDIT_URL=... PLAUDIT_TOKEN=...
 *   npm run build && npx tsc -p tsconfig.examples.json
 *   node build/examples/agent-loop.js [rounds]
 *
 * `callModel` stands in for your LLM call so the example runs without an API key; replace it
 * with a real call and keep everything else.
 */
import { type ArmInput, PlauditClient, PlauditError, PlauditHttpError, type ToolCall } from "@plaudit/client";

/** The prompt components the bandit chooses among. */
const ARMS: ArmInput[] = [
  { id: "tool:exec:Bash", tokens: 300 },
  { id: "tool:web:WebSearch", tokens: 450 },
  { id: "skill:testing:main", tokens: 900 },
  { id: "file:workspace:docs/architecture.md", tokens: 2500 },
  {
    id: "memory:user:commit-style",
    tokens: 60,
    content: "Commit subjects are imperative and under 60 characters.",
  },
];

interface Task {
  id: string;
  kind: "code" | "research";
  intent: string;
}

const TASKS: Task[] = [
  { id: "fix-login", kind: "code", intent: "the login form rejects valid passwords" },
  { id: "compare-queues", kind: "research", intent: "which message queue suits 10k events/s" },
  { id: "add-retry", kind: "code", intent: "retry the payment call on a 503" },
  { id: "summarise-rfc", kind: "research", intent: "summarise RFC 9110's caching rules" },
];

interface ModelResult {
  text: string;
  toolCalls: ToolCall[];
  usageTokens: number;
  testsPassed: boolean;
}

/**
 * Stand-in for the model: it uses what its prompt offers and what the task needs. Code tasks
 * run Bash, read the architecture notes, talk about testing and write a commit; research tasks
 * search the web. Without what it needs, it fails.
 */
async function callModel(task: Task, prompt: string, round: number): Promise<ModelResult> {
  const offers = (id: string) => prompt.includes(`[${id}]`);
  const toolCalls: ToolCall[] = [];
  const lines: string[] = [];
  if (task.kind === "code") {
    if (offers("tool:exec:Bash")) toolCalls.push({ name: "Bash", arguments: { command: "npm test" } });
    if (offers("file:workspace:docs/architecture.md"))
      lines.push("Per docs/architecture.md the handler lives in api/.");
    if (offers("skill:testing:main")) lines.push("Added a regression test; testing passes.");
    if (offers("memory:user:commit-style"))
      lines.push("Commit subjects are imperative and under 60 characters.");
  } else {
    if (offers("tool:web:WebSearch"))
      toolCalls.push({ name: "WebSearch", arguments: { query: task.intent } });
    lines.push(`Findings on: ${task.intent}.`);
  }
  const needed = task.kind === "code" ? "tool:exec:Bash" : "tool:web:WebSearch";
  return {
    text: lines.join("\n"),
    toolCalls,
    usageTokens: Math.round(prompt.length / 4) + 200 + 17 * (round % 5),
    testsPassed: offers(needed),
  };
}

function buildPrompt(task: Task, included: string[]): string {
  const parts = included.map((id) => `[${id}]`); // in a real agent: the component's text
  return [...parts, `Task: ${task.intent}`].join("\n");
}

async function main(rounds: number): Promise<void> {
  const plaudit = new PlauditClient(); // PLAUDIT_URL and PLAUDIT_TOKEN, else 127.0.0.1:8377
  const runTag = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const startHead = await plaudit.log.head();

  const session = await plaudit.ledger.startSession({ label: `agent-loop ${runTag}` });

  for (let round = 0; round < rounds; round++) {
    const task = TASKS[round % TASKS.length]!;
    const decisionId = `${runTag}-${round}`;

    // 1. The router picked this task; record the decision so it becomes training data.
    await plaudit.signals.decision({
      decision_id: decisionId,
      chosen_task: task.id,
      confidence: 0.7,
      user_intent: task.intent,
      candidates: TASKS.map((t) => t.id),
    });

    // 2. The bandit chooses among this agent's components for this kind of task.
    const selection = await plaudit.bandit.select({
      arms: ARMS,
      token_budget: 5000, // the inventory fits: every arm is tried in each kind of task, so it is learnt
      context: task.kind,
      session_id: runTag,
    });
    const prompt = buildPrompt(task, selection.included);

    // 3. Run the model, then tell the bandit what it used.
    const started = performance.now();
    const result = await callModel(task, prompt, round);
    const observation = await plaudit.bandit.observe({
      run_id: selection.run_id,
      output_text: result.text,
      tool_calls: result.toolCalls,
      usage_tokens: result.usageTokens,
      duration_ms: performance.now() - started,
    });

    // 4. Score the result and close the router's loop. `key` makes a retried record safe.
    await plaudit.ledger.record({
      category: result.testsPassed ? "successful_validation" : "validation_failure",
      action: `${task.id}: tests ${result.testsPassed ? "pass" : "fail"}`,
      key: `${decisionId}-score`,
    });
    await plaudit.signals.outcome({
      decision_id: decisionId,
      outcome: result.testsPassed ? "success" : "failure",
      task_executed: task.id,
      time_to_resolution_ms: Math.round(performance.now() - started),
    });

    const used = Object.entries(observation.rewards)
      .filter(([, reward]) => reward > 0)
      .map(([id]) => id);
    console.log(
      `round ${String(round + 1).padStart(2)}  ${task.kind.padEnd(8)} ${selection.is_baseline ? "baseline" : "selected"}` +
        `  ${selection.used_tokens} tokens  used ${used.length}/${selection.included.length}` +
        `  tests ${result.testsPassed ? "pass" : "FAIL"}`,
    );
  }

  const ended = await plaudit.ledger.endSession({ session: session.session_id });
  const score = await plaudit.ledger.score();
  console.log(
    `\nsession score ${ended.score} over ${ended.transactions} transactions; total ${score.total_score}`,
  );

  for (const kind of ["code", "research"] as const) {
    const posteriors = await plaudit.bandit.posteriors({ context: kind });
    const ranked = posteriors.arms
      .filter((a) => a.pulls > 0 && ARMS.some((arm) => arm.id === a.id))
      .sort((a, b) => b.mean - a.mean)
      .map((a) => `${a.id} ${a.mean.toFixed(2)}`);
    console.log(`${kind}: ${ranked.join(", ") || "no observations yet"}`);
  }

  const verification = await plaudit.log.verify({ against: startHead.digest });
  if (!verification.ok) throw new Error(`log verification failed: ${verification.reason}`);
  console.log(
    `log verified: ${verification.checked} events, still extends ${startHead.digest.slice(0, 16)}...`,
  );
}

const rounds = Number(process.argv[2] ?? 8);
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error(`usage: agent-loop [rounds]; rounds must be a positive integer, not ${process.argv[2]}`);
  process.exit(2);
}
main(rounds).catch((err: unknown) => {
  if (err instanceof PlauditHttpError) {
    console.error(`plaudit refused a call: ${err.message}`);
  } else if (err instanceof PlauditError) {
    console.error(`cannot reach plaudit: ${err.message}`);
  } else {
    console.error(err);
  }
  process.exit(1);
});
