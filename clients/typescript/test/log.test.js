// @ts-check
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { PlauditHttpError } from "@plaudit/client";
import { rejection, unique, useServer } from "./helpers.js";

const live = useServer();

describe("log", () => {
  test("wait: false is passed through; a store without an intake still appends", async () => {
    const c = live.client;
    const id = unique("evt");
    const type = `tsclient.${unique("t").replace(/-/g, "_")}.v1`;
    const res = await c.log.append({ type, id, payload: { n: 1 } }, { wait: false });
    // The test server is SQLite, which has no intake: the event has its position at once.
    assert.equal(res.queued, 0);
    assert.equal(res.appended, 1);
    assert.ok((res.results[0]?.seq ?? 0) > 0);
  });

  test("an appended event is in the head, the chain and the tail", async () => {
    const c = live.client;
    const before = await c.log.head();
    const id = unique("evt");
    const type = `tsclient.${unique("t").replace(/-/g, "_")}.v1`;
    const appended = await c.log.append({ type, id, payload: { answer: 42, nested: { ok: true } } });
    assert.equal(appended.appended, 1);
    assert.deepEqual(
      appended.results.map((r) => [r.id, r.status]),
      [[id, "appended"]],
    );
    const seq = appended.results[0]?.seq ?? NaN;
    assert.ok(seq > before.length);

    const head = await c.log.head();
    assert.ok(head.length >= seq);
    assert.equal(head.digest, `${head.length}:${head.hash}`);

    // The log still extends the digest taken before the append.
    const verified = await c.log.verify({ against: before.digest });
    assert.equal(verified.ok, true);
    assert.equal(verified.first_bad, null);
    assert.equal(verified.against, before.digest);
    assert.ok(verified.checked >= seq);

    const stored = await c.log.event(id);
    assert.equal(stored.seq, seq);
    assert.equal(stored.type, type);
    assert.deepEqual(stored.payload, { answer: 42, nested: { ok: true } });
    assert.match(stored.hash, /^[0-9a-f]{64}$/);

    const tail = await c.log.tail({ n: 5, type: [type] });
    assert.deepEqual(
      tail.map((e) => e.id),
      [id],
    );
    assert.ok((await c.log.stats()).by_type[type] === 1);
  });

  test("a verify against a digest the log never had is not ok", async () => {
    const head = await live.client.log.head();
    const forged = `${head.length}:${"0".repeat(64)}`;
    const verified = await live.client.log.verify({ against: forged });
    assert.equal(verified.ok, false);
    assert.equal(typeof verified.reason, "string");
  });

  test("ids make appends idempotent; other content under an id is a 409 or, on request, skipped", async () => {
    const c = live.client;
    const id = unique("evt");
    await c.log.append({ type: "tsclient.retry.v1", id, payload: { n: 1 }, ts_ms: 1_700_000_000_000 });
    const again = await c.log.append({
      type: "tsclient.retry.v1",
      id,
      payload: { n: 1 },
      ts_ms: 1_700_000_000_000,
    });
    assert.equal(again.appended, 0);
    assert.equal(again.present, 1);

    const clash = await rejection(c.log.append({ type: "tsclient.retry.v1", id, payload: { n: 2 } }));
    assert.ok(clash instanceof PlauditHttpError);
    assert.equal(clash.status, 409);
    assert.equal(clash.kind, "ConflictError");

    const other = unique("evt");
    const skipped = await c.log.append(
      [
        { type: "tsclient.retry.v1", id, payload: { n: 2 } },
        { type: "tsclient.retry.v1", id: other, payload: { n: 3 } },
      ],
      { on_conflict: "skip" },
    );
    assert.deepEqual(skipped.conflicts, [id]);
    assert.equal(skipped.appended, 1);
    assert.deepEqual((await c.log.event(id)).payload, { n: 1 }, "the original is untouched");
  });

  test("a batch with one bad event appends none of it", async () => {
    const c = live.client;
    const good = unique("evt");
    const err = await rejection(
      c.log.append([
        { type: "tsclient.batch.v1", id: good },
        { type: "not-namespaced", id: unique("evt") },
      ]),
    );
    assert.ok(err instanceof PlauditHttpError);
    assert.equal(err.status, 422);
    assert.match(err.body.message, /event\[1\]/);
    const missing = await rejection(c.log.event(good));
    assert.ok(missing instanceof PlauditHttpError);
    assert.equal(missing.status, 404);
    assert.equal(missing.kind, "NotFoundError");
  });
});
