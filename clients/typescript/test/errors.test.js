// @ts-check
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { describe, test } from "node:test";
import {
  PlauditClient,
  PlauditError,
  PlauditHttpError,
  PlauditNetworkError,
  PlauditResponseError,
  PlauditTimeoutError,
} from "@plaudit/client";
import { rejection, unique, useServer } from "./helpers.js";

const live = useServer();

/**
 * A throwaway HTTP server on a free loopback port that answers with `handler`, for what a real
 * plaudit never does (stall, send HTML) and to see exactly what the client sends.
 * @param {import("node:http").RequestListener} handler
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
async function fakeServer(handler) {
  const server = createServer(handler);
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  assert.ok(address && typeof address === "object");
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("errors from a live server", () => {
  test("a write without the token is a 401 with its challenge; reads stay open", async (t) => {
    const health = await live.client.health();
    if (!health.write_auth) {
      t.skip(`${live.server.url} takes writes without a token`);
      return;
    }
    const anonymous = new PlauditClient({ baseUrl: live.server.url, token: "" });
    const err = await rejection(anonymous.ledger.record({ category: "pattern_reuse", action: "x" }));
    assert.ok(err instanceof PlauditHttpError);
    assert.ok(err instanceof PlauditError);
    assert.equal(err.status, 401);
    assert.equal(err.kind, "Unauthorized");
    assert.equal(err.headers.get("www-authenticate"), "Bearer");
    assert.equal(err.method, "POST");
    assert.match(err.message, /^POST \/v1\/ledger\/record failed with 401 Unauthorized: /);

    const wrong = new PlauditClient({ baseUrl: live.server.url, token: "not-the-token" });
    assert.equal(
      /** @type {PlauditHttpError} */ (await rejection(wrong.log.append({ type: "a.b.v1" }))).status,
      401,
    );
    assert.equal(typeof (await anonymous.log.head()).length, "number");
  });

  test("a body that does not fit the schema lists every problem with its location", async () => {
    const err = await rejection(
      live.client.bandit.select(/** @type {any} */ ({ token_budget: "lots", colour: "red" })),
    );
    assert.ok(err instanceof PlauditHttpError);
    assert.equal(err.status, 422);
    assert.equal(err.kind, "ValidationError");
    const fields = err.problems.map((p) => p.field).sort();
    assert.deepEqual(fields, ["body.colour", "body.token_budget"]);
    const budget = err.problems.find((p) => p.field === "body.token_budget");
    assert.deepEqual(budget?.loc, ["body", "token_budget"]);
    assert.equal(budget?.input, "lots");
  });

  test("call() reaches any documented operation, with path parameters and a query", async () => {
    const c = live.client;
    const id = `tool:exec:${unique("T")}`;
    await c.call("post", "/v1/bandit/arms", { body: { arms: [{ id, tokens: 10 }] } });
    const detail = await c.call("get", "/v1/bandit/arms/{arm_id}", { params: { arm_id: id } });
    assert.deepEqual(/** @type {any} */ (detail).arm, { id, tokens: 10, kind: "curated" });
    const tx = await c.call("get", "/v1/ledger/transactions", { query: { limit: 1 } });
    assert.ok(Array.isArray(/** @type {any} */ (tx).transactions));
    const missing = await rejection(
      c.call("get", "/v1/bandit/runs/{run_id}", { params: { run_id: unique("r") } }),
    );
    assert.ok(missing instanceof PlauditHttpError);
    assert.equal(missing.status, 404);
  });
});

describe("errors without a plaudit answer", () => {
  test("a refused connection is a PlauditNetworkError carrying the cause", async () => {
    const fake = await fakeServer((_req, res) => res.end());
    await fake.close(); // the port is now free: nothing listens there
    const err = await rejection(new PlauditClient({ baseUrl: fake.url }).log.head());
    assert.ok(err instanceof PlauditNetworkError);
    assert.ok(!(err instanceof PlauditTimeoutError));
    assert.match(err.message, /ECONNREFUSED|refused/i);
    assert.ok(err.cause);
  });

  test("a server that never answers is a PlauditTimeoutError after timeoutMs", async () => {
    const fake = await fakeServer(() => {}); // reads the request, never responds
    try {
      const started = Date.now();
      const err = await rejection(new PlauditClient({ baseUrl: fake.url, timeoutMs: 200 }).log.head());
      assert.ok(err instanceof PlauditTimeoutError);
      assert.equal(err.timeoutMs, 200);
      assert.ok(Date.now() - started >= 190);
      const perCall = await rejection(new PlauditClient({ baseUrl: fake.url }).log.head({ timeoutMs: 50 }));
      assert.ok(perCall instanceof PlauditTimeoutError);
      assert.equal(perCall.timeoutMs, 50);
    } finally {
      await fake.close();
    }
  });

  test("the caller's own abort is passed through as an AbortError", async () => {
    const fake = await fakeServer(() => {});
    try {
      const controller = new AbortController();
      const pending = new PlauditClient({ baseUrl: fake.url }).log.head({ signal: controller.signal });
      controller.abort();
      const err = await rejection(pending);
      assert.ok(err instanceof Error);
      assert.equal(err.name, "AbortError");
      assert.ok(!(err instanceof PlauditError));
    } finally {
      await fake.close();
    }
  });

  test("an error page that is not plaudit's JSON still gives the status and the text", async () => {
    const fake = await fakeServer((_req, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end("<html><body>upstream down</body></html>");
    });
    try {
      const err = await rejection(new PlauditClient({ baseUrl: fake.url }).ledger.score());
      assert.ok(err instanceof PlauditHttpError);
      assert.equal(err.status, 502);
      assert.equal(err.kind, "HTTPError");
      assert.match(err.body.message, /Bad Gateway: <html><body>upstream down/);
    } finally {
      await fake.close();
    }
  });

  test("a 200 that is not JSON is a PlauditResponseError", async () => {
    const fake = await fakeServer((_req, res) => res.end("{truncated"));
    try {
      const err = await rejection(new PlauditClient({ baseUrl: fake.url }).log.head());
      assert.ok(err instanceof PlauditResponseError);
      assert.equal(err.status, 200);
      assert.equal(err.text, "{truncated");
    } finally {
      await fake.close();
    }
  });

  test("URL, token and query are sent as documented; PLAUDIT_URL and PLAUDIT_TOKEN are defaults", async () => {
    /** @type {{ url?: string, auth?: string, type?: string, body: string }[]} */
    const seen = [];
    const fake = await fakeServer((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        seen.push({ url: req.url, auth: req.headers.authorization, type: req.headers["content-type"], body });
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ events: [] }));
      });
    });
    const saved = { url: process.env.PLAUDIT_URL, token: process.env.PLAUDIT_TOKEN };
    try {
      process.env.PLAUDIT_URL = `${fake.url}/`;
      process.env.PLAUDIT_TOKEN = "from-env";
      const c = new PlauditClient();
      assert.equal(c.baseUrl, fake.url);
      await c.log.tail({ n: 3, type: ["a.", "b c"] });
      await c.bandit.posteriors({ context: null, level: 0.9 });
      await c.bandit.arm("file:workspace:docs/a b.md");
      await new PlauditClient({ token: "explicit" }).ledger.record({ category: "x", action: "é" });
      assert.deepEqual(
        seen.map((s) => s.url),
        [
          "/v1/log/tail?n=3&type=a.&type=b+c",
          "/v1/bandit/posteriors?level=0.9",
          "/v1/bandit/arms/file%3Aworkspace%3Adocs%2Fa%20b.md",
          "/v1/ledger/record",
        ],
      );
      assert.deepEqual(
        seen.map((s) => s.auth),
        ["Bearer from-env", "Bearer from-env", "Bearer from-env", "Bearer explicit"],
      );
      assert.equal(seen[3]?.type, "application/json");
      assert.deepEqual(JSON.parse(seen[3]?.body ?? ""), { category: "x", action: "é" });
      assert.equal(seen[0]?.type, undefined, "a GET sends no body");
    } finally {
      for (const [key, value] of [
        ["PLAUDIT_URL", saved.url],
        ["PLAUDIT_TOKEN", saved.token],
      ]) {
        if (value === undefined) delete process.env[/** @type {string} */ (key)];
        else process.env[/** @type {string} */ (key)] = value;
      }
      await fake.close();
    }
  });

  test("a base URL that is not http(s) is refused when the client is made", () => {
    assert.throws(
      () => new PlauditClient({ baseUrl: "localhost:8377" }),
      /must be an http:\/\/ or https:\/\/ URL/,
    );
    assert.throws(() => new PlauditClient({ baseUrl: "not a url" }), /is not an absolute URL/);
    assert.throws(() => new PlauditClient({ baseUrl: "http://x", timeoutMs: -1 }), /timeoutMs/);
  });
});
