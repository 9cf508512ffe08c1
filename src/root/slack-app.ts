// The composition root's Slack and HTTP side: the Bolt app (HTTP receiver or Socket Mode), the routes
// served beside /slack/events, and the loopback metrics server. Imported by app.ts only.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { webApi } from "@slack/bolt";
import { App, type Logger as BoltLogger, ErrorCode, HTTPReceiver, LogLevel, type ReceiverDispatchErrorHandlerArgs } from "@slack/bolt";
import { FLOW_HOOK_PATH, FLOW_HOOK_PREFIX } from "../adapters/http/flow-intake.js";
import { CALLBACK_PATH, isCallbackPath, matchCallbackUrl } from "../adapters/http/routes.js";
import { answerHandlerError, guardSlackEvents } from "../adapters/slack/guard.js";
import type { DbInstallationStore } from "../adapters/slack/installations.js";
import { INSTALL_PATH, installerReceiverOptions, REDIRECT_PATH } from "../adapters/slack/oauth.js";
import type { AppConfig } from "../config/config.js";
import { type Logger, sampledLog } from "../log/log.js";

type Handler = (req: IncomingMessage & { params: Record<string, string> }, res: ServerResponse) => void | Promise<void>;

/** The plain HTTP routes beside Slack's: crew callbacks, flow feedback requests, the health check, the figures. */
export interface HttpRoutes {
  callbacks: Handler;
  flowIntake: Handler;
  health: Handler;
  metrics: Handler;
}

/** The metrics port answers GET /metrics and nothing else. */
export function metricsOnlyListener(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>) {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === "GET" && (req.url ?? "").split("?")[0] === "/metrics") return void handle(req, res);
    req.resume();
    res.writeHead(404, { "content-type": "text/plain; charset=utf-8" }).end("not found\n");
  };
}

export function boltLogger(log: Logger): BoltLogger {
  const join = (msg: unknown[]) => msg.map((m) => (m instanceof Error ? m.message : typeof m === "string" ? m : JSON.stringify(m))).join(" ");
  return {
    debug: (...msg) => log.debug(join(msg)),
    info: (...msg) => log.info(join(msg)),
    warn: (...msg) => log.warn(join(msg)),
    error: (...msg) => log.error(join(msg)),
    setLevel: () => {},
    getLevel: () => LogLevel.INFO,
    setName: () => {},
  };
}

/** How much of a URL nobody routes goes into the log: enough to recognise it, not an attacker's 10 KB. */
const URL_EXCERPT_CHARS = 200;
/** A URL nobody routes, as logged: bounded, without its query (tokens travel there; the logger redacts a /hooks/ path's secret). */
function excerpt(url: string | undefined): string {
  const u = (url ?? "").replace(/[?#].*$/s, "?…");
  return u.length <= URL_EXCERPT_CHARS ? u : `${u.slice(0, URL_EXCERPT_CHARS)}…`;
}

/**
 * PUBLIC_URL's path ("/crewline" for https://example.com/crewline/), or "". Crew and flow webhook URLs
 * are built under it; a proxy that passes the path through sends them to `<path>/hooks/…`.
 */
export function publicPathOf(publicUrl: string | undefined): string {
  return publicUrl ? new URL(publicUrl).pathname.replace(/\/+$/, "") : "";
}

/** The paths the bot serves beside /hooks/ (Slack's events, the installer, the health check, the figures). */
const SERVED_PATHS = new Set(["/slack/events", INSTALL_PATH, REDIRECT_PATH, "/healthz", "/metrics"]);
const isServed = (url: string) => isCallbackPath(url) || SERVED_PATHS.has(url.split(/[?#]/, 1)[0]!);

/**
 * The request's URL without PUBLIC_URL's path, when it is one of our paths under it (a proxy that
 * passes the path through: Slack's request URL and the OAuth redirect are under PUBLIC_URL too).
 * Judged by what is left, so a path of `/slack` or `/hooks` still leaves `/slack/events` and `/hooks/…` as they are.
 */
export function unprefixed(url: string | undefined, prefix: string): string | undefined {
  if (!prefix || !url?.startsWith(`${prefix}/`)) return url;
  const rest = url.slice(prefix.length);
  return isServed(rest) ? rest : url;
}

/** Every request is routed without PUBLIC_URL's path first, so the guard of /slack/events sees the path Bolt routes. */
function withoutPublicPath(receiver: HTTPReceiver, prefix: string): HTTPReceiver {
  if (!prefix) return receiver;
  const next = receiver.requestListener;
  receiver.requestListener = (req, res) => {
    req.url = unprefixed(req.url, prefix);
    return next(req, res);
  };
  return receiver;
}

/**
 * What the HTTP receiver does with a request no route takes. Bolt's default logged every one with its
 * whole URL: anyone could write lines at will. 404 (400 for a target Bolt cannot parse), one sampled
 * line per method a minute. Anything else thrown while routing is a bug of ours: 500, a line each time.
 */
function quietDispatchErrorHandler(log: Logger) {
  const unrouted = sampledLog(log);
  return ({ error, request, response }: ReceiverDispatchErrorHandlerArgs): void => {
    request.resume();
    const code = (error as Error & { code?: unknown }).code;
    const status = code === ErrorCode.HTTPReceiverDeferredRequestError ? 404 : code === "ERR_INVALID_URL" ? 400 : 500;
    // The method is one of llhttp's few names, so the keys stay bounded.
    const method = (request.method ?? "").slice(0, 20);
    if (status === 500) log.error("HTTP request failed while being routed", { method, url: excerpt(request.url), err: error.message.slice(0, 200) });
    else unrouted.warn(status === 404 ? "request to an unknown path" : "request with an unreadable target", method, { method, url: excerpt(request.url) });
    if (!response.headersSent)
      response.writeHead(status, { "content-type": "text/plain; charset=utf-8" }).end(`${status === 404 ? "not found" : status === 400 ? "bad request" : "internal error"}\n`);
  };
}

/** Socket Mode's own HTTP server has no such handler: its line for an unrouted request goes the same sampled way. */
function quietUnroutedLines(logger: BoltLogger, log: Logger): BoltLogger {
  const unrouted = sampledLog(log);
  return {
    ...logger,
    info: (...msg: unknown[]) => {
      const m = typeof msg[0] === "string" ? /^An unhandled HTTP request \((\w{1,20})\) made to /.exec(msg[0]) : null;
      if (!m) return logger.info(...msg);
      unrouted.warn("request to an unknown path", m[1]!, { method: m[1], url: excerpt((msg[0] as string).slice(m[0].length).replace(/ was ignored$/, "")) });
    },
  };
}

/**
 * Crew callbacks (thousands of step POSTs in a burst) go straight to their handler; the rest to Bolt.
 * Every method and shape of a /hooks/ path gets the handler's answer (404, 405): Bolt would log the URL, secret included.
 */
function withCallbackFastPath(receiver: HTTPReceiver, handle: (req: IncomingMessage & { params: Record<string, string> }, res: ServerResponse) => void): HTTPReceiver {
  const boltListener = receiver.requestListener;
  receiver.requestListener = (req, res) => {
    if (isCallbackPath(req.url)) return handle(Object.assign(req, { params: matchCallbackUrl(req.url) ?? {} }), res);
    return boltListener(req, res);
  };
  return receiver;
}

/** Every method under /hooks/ is ours (405 for non-POST): Bolt would log the path, secret included. */
const ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/** The Bolt app: Socket Mode when SLACK_APP_TOKEN is set, else the HTTP receiver (installable with OAuth). */
export function createSlackApp(
  config: AppConfig,
  p: { routes: HttpRoutes; clientOptions: webApi.WebClientOptions; logger: BoltLogger; log: Logger; installations?: DbInstallationStore },
): App {
  const { routes, clientOptions, logger, log } = p;
  const hooks: Handler = (req, res) => (req.url?.startsWith(FLOW_HOOK_PREFIX) && req.method === "POST" ? routes.flowIntake(req, res) : routes.callbacks(req, res));
  const prefix = publicPathOf(config.publicUrl);
  const flowHook = (req: any, res: any) => (req.method === "POST" ? routes.flowIntake(req, res) : routes.callbacks(req, res));
  const served = [
    { path: CALLBACK_PATH, method: ALL_METHODS, handler: routes.callbacks },
    { path: FLOW_HOOK_PATH, method: ALL_METHODS, handler: flowHook },
    // HEAD as GET: Node leaves out the body of an answer to HEAD.
    { path: "/healthz", method: ["GET", "HEAD"], handler: routes.health },
    { path: "/metrics", method: ["GET"], handler: routes.metrics },
  ] as { path: string; method: string[]; handler: (req: any, res: any) => void }[];
  // Socket Mode's server matches its routes itself, so each is also served under PUBLIC_URL's path
  // (the HTTP receiver takes the path off every request first). The prefix is matched as written:
  // path-to-regexp's special characters in it are escaped.
  const routed = prefix.replace(/[{}()[\]+?!:*\\]/g, "\\$&");
  const underPrefix = (handler: Handler) => (req: any, res: any) => {
    req.url = unprefixed(req.url, prefix);
    return handler(req, res);
  };
  const customRoutes = config.slack.appToken && prefix ? [...served, ...served.map((r) => ({ ...r, path: `${routed}${r.path}`, handler: underPrefix(r.handler) }))] : served;
  const oauth = config.slack.oauth;
  if (config.slack.appToken)
    return new App({
      token: config.slack.botToken,
      appToken: config.slack.appToken,
      socketMode: true,
      customRoutes,
      // The Socket Mode client has its own Web API client (apps.connections.open): same base URL.
      installerOptions: { port: config.port, clientOptions },
      clientOptions,
      logger: quietUnroutedLines(logger, log),
    });
  return new App({
    token: config.slack.botToken,
    receiver: withoutPublicPath(
      guardSlackEvents(
        withCallbackFastPath(
          new HTTPReceiver({
            signingSecret: config.slack.signingSecret!,
            endpoints: "/slack/events",
            customRoutes,
            logger,
            processEventErrorHandler: answerHandlerError,
            dispatchErrorHandler: quietDispatchErrorHandler(log),
            ...(oauth && p.installations ? installerReceiverOptions(oauth, p.installations, clientOptions, config.publicUrl) : {}),
          }),
          hooks,
        ),
        log,
        config.slack.signingSecret!,
      ),
      prefix,
    ),
    clientOptions,
    logger,
  });
}

/** METRICS_PORT: the figures alone, on loopback by default. */
export function metricsServer(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>): Server {
  return createServer(metricsOnlyListener(handle));
}
