// Compile-time checks of the public types: `npm test` type-checks this file (tsconfig.check.json)
// and fails if a line marked @ts-expect-error compiles, i.e. if the types stop catching a mistake.
import { PlauditClient } from "@plaudit/client";
const c = new PlauditClient();
// @ts-expect-error a GET takes no body
void c.call("get", "/v1/log/head", { body: {} });
// @ts-expect-error a POST with a required body needs it
void c.call("post", "/v1/ledger/record", {});
void c.call("post", "/v1/ledger/reconcile");
void c.call("post", "/v1/ledger/reconcile", { body: { recover: true } });
// @ts-expect-error unknown path
void c.call("get", "/v1/nope");
// @ts-expect-error wrong query type
void c.call("get", "/v1/ledger/transactions", { query: { limit: "x" } });
// @ts-expect-error missing path param
void c.call("get", "/v1/bandit/runs/{run_id}", {});
void c.call("get", "/v1/bandit/runs/{run_id}", { params: { run_id: "r" } });
// @ts-expect-error select takes no unknown field
void c.bandit.select({ budget: 3 });
// @ts-expect-error outcome is an enum
void c.signals.outcome({ decision_id: "d", outcome: "great", task_executed: "t" });
