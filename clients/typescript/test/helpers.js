// @ts-check
/** Shared by the test files: one live server per file, and names no other run uses. */
import { randomUUID } from "node:crypto";
import { after, before } from "node:test";
import { PlauditClient } from "@plaudit/client";
import { liveServer } from "../scripts/plaudit-server.mjs";

/** @typedef {import("../scripts/plaudit-server.mjs").LiveServer} LiveServer */

/**
 * Starts a fresh `plaudit serve` (or uses PLAUDIT_URL) before this file's tests, stops it after.
 * The tests only assert what holds on a server other clients use too (a PLAUDIT_URL server may
 * hold data already), so they compare before and after, and name things uniquely.
 */
export function useServer() {
  /** @type {LiveServer | undefined} */
  let server;
  /** @type {PlauditClient | undefined} */
  let client;
  before(async () => {
    server = await liveServer();
    client = new PlauditClient({ baseUrl: server.url, token: server.token });
  });
  after(async () => {
    await server?.stop();
  });
  return {
    get server() {
      if (!server) throw new Error("the server is started in before()");
      return server;
    },
    get client() {
      if (!client) throw new Error("the client is made in before()");
      return client;
    },
  };
}

/** A name no earlier run used, safe in ids, arm names and labels. */
export function unique(prefix = "t") {
  return `${prefix}-${randomUUID().slice(0, 13)}`;
}

/**
 * Resolves to the rejection of `promise` (failing if it resolves), for asserting on the error.
 * @param {Promise<unknown>} promise
 * @returns {Promise<unknown>}
 */
export async function rejection(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error("expected the call to fail, but it succeeded");
}
