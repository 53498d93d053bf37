/**
 * The errors this client throws. Every one is a `PlauditError`, so one `instanceof` check
 * separates plaudit's failures from bugs in the calling code. An `AbortError` from the caller's
 * own `signal` is passed through unchanged, as `fetch` does.
 */

/** One problem in a request that did not fit the schema (a 422 from the request models). */
export interface ValidationProblem {
  /** Where, as FastAPI gives it: `["body", "events", 3, "type"]`. */
  loc: (string | number)[];
  /** The same place as a dotted path: `body.events[3].type`. */
  field: string;
  msg: string;
  type: string;
  /** The offending value, when it is short. */
  input?: unknown;
}

/**
 * The body of every plaudit error response: a kind, a sentence saying what was wrong and where,
 * then details that depend on the kind.
 */
export interface ErrorBody {
  /** `ValidationError`, `NotFoundError`, `ConflictError`, `Unauthorized`, ... */
  error: string;
  message: string;
  /** The field the library rejected, for its own `ValidationError`. */
  field?: string;
  /** Which item of a list, e.g. `event[1]` or `arms[0]`. */
  where?: string;
  reason?: string;
  /** Every schema problem, for a 422 from the request models. */
  detail?: ValidationProblem[];
  [key: string]: unknown;
}

/** Base class of everything the client throws for a failed call. */
export class PlauditError extends Error {
  override name = "PlauditError";
}

/** The server answered with an HTTP error status; `body` is its JSON error object. */
export class PlauditHttpError extends PlauditError {
  override name = "PlauditHttpError";
  /** The HTTP status: 400, 401, 404, 409, 413, 422, 503, ... */
  readonly status: number;
  /** The server's error object (for a response that was not plaudit's JSON, a synthesised one). */
  readonly body: ErrorBody;
  readonly method: string;
  readonly url: string;
  /** The response headers, e.g. `www-authenticate` on a 401. */
  readonly headers: Headers;

  constructor(status: number, body: ErrorBody, method: string, url: string, headers: Headers) {
    super(`${method} ${new URL(url).pathname} failed with ${status} ${body.error}: ${body.message}`);
    this.status = status;
    this.body = body;
    this.method = method;
    this.url = url;
    this.headers = headers;
  }

  /** The kind of error, `body.error`: `ValidationError`, `NotFoundError`, ... */
  get kind(): string {
    return this.body.error;
  }

  /** Schema problems, one per offending field (empty unless the request did not fit). */
  get problems(): ValidationProblem[] {
    return Array.isArray(this.body.detail) ? this.body.detail : [];
  }
}

/** The request never got an HTTP answer: connection refused, DNS failure, reset. */
export class PlauditNetworkError extends PlauditError {
  override name = "PlauditNetworkError";
  readonly method: string;
  readonly url: string;

  constructor(message: string, method: string, url: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.method = method;
    this.url = url;
  }
}

/** No answer within the client's `timeoutMs`. A write may still have been applied. */
export class PlauditTimeoutError extends PlauditNetworkError {
  override name = "PlauditTimeoutError";
  readonly timeoutMs: number;

  constructor(method: string, url: string, timeoutMs: number) {
    super(`${method} ${url} got no answer within ${timeoutMs} ms`, method, url);
    this.timeoutMs = timeoutMs;
  }
}

/** The server answered 2xx but not with JSON (a proxy's page, a truncated body). */
export class PlauditResponseError extends PlauditError {
  override name = "PlauditResponseError";
  readonly status: number;
  /** The start of what the server sent. */
  readonly text: string;

  constructor(message: string, status: number, text: string) {
    super(message);
    this.status = status;
    this.text = text;
  }
}
