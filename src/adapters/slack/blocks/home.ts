// The App Home tab: reviews waiting for this user, their recent runs, and the crews they can start.
// Pure: the handler gathers the data; this only lays it out within Block Kit's limits
// (100 blocks per view, 3,000 chars per section text).
import type { types } from "@slack/bolt";
import type { HomeListing, WithheldReview } from "../../../usecases/home-for.js";
import { HOME_APPROVE_ACTION, HOME_FLOW_APPROVE_ACTION } from "./ids.js";
import { LIMITS } from "./limits.js";
import { runStateLabel } from "./run.js";
import { escapeMrkdwn, excerpt, formatDuration, truncatePlain } from "./text.js";

export interface HomeReview {
  crewName: string;
  taskName: string;
  round: number;
  waitingMs: number;
  channelId: string;
  permalink?: string;
  /** Set when it can be approved from here (a crew review: approving needs no feedback): its id for the Approve button. */
  approveReviewId?: string;
  /** Set when a flow request can be approved from here (its flow offers an approve-like outcome): its id. */
  approveFlowRequestId?: string;
  /** e.g. "↪️ reassigned to you", "🔺 escalated", "⏳ decide by …" */
  notes?: string[];
}

export interface HomeRun {
  crewName: string;
  state: string;
  channelId: string;
  kickoffId?: string;
  startedAt: Date;
  permalink?: string;
}

export interface HomeParams {
  userId: string;
  reviews: HomeReview[];
  /** Reviews waiting for the user whose runs they may not see: said without their content (no crew, task, link or Approve). */
  withheld?: WithheldReview[];
  runs: HomeRun[];
  /** Channel allow-list of each (unset: any channel). */
  crews: HomeListing<unknown>["crews"];
  now: Date;
  /** Configured flows and their webhook URLs (for admins setting them up). */
  flows?: { name: string; webhookUrl: string }[];
  /** What the user's last action from this tab did (e.g. "✅ You approved …"). */
  notice?: string;
}

export const HOME_MAX_REVIEWS = 30;
export const HOME_MAX_RUNS = 15;
export const HOME_MAX_CREWS = 30;
/** At most this many channels are named for reviews withheld. */
export const HOME_MAX_WITHHELD_CHANNELS = 10;

const name = (text: string) => escapeMrkdwn(truncatePlain(text, 80));
// mrkdwn is cut with excerpt(), which keeps line breaks; truncatePlain is for single-line plain_text.
const section = (text: string): types.KnownBlock => ({ type: "section", text: { type: "mrkdwn", text: excerpt(text, LIMITS.sectionText).text } });
const header = (text: string): types.KnownBlock => ({ type: "header", text: { type: "plain_text", text: truncatePlain(text, LIMITS.header) } });
const context = (text: string): types.KnownBlock => ({ type: "context", elements: [{ type: "mrkdwn", text: excerpt(text, LIMITS.contextText).text }] });
const more = (n: number, what: string) => (n > 0 ? [context(`…and ${n} more ${what}.`)] : []);

/** Lines joined into as few sections as fit the 3,000-char section limit. */
function packed(lines: string[]): types.KnownBlock[] {
  const blocks: types.KnownBlock[] = [];
  let current = "";
  for (const line of lines) {
    if (current && current.length + 1 + line.length > LIMITS.sectionText) {
      blocks.push(section(current));
      current = "";
    }
    current = current ? `${current}\n${line}` : line;
  }
  if (current) blocks.push(section(current));
  return blocks;
}

/**
 * One line per channel for the reviews waiting for the user in runs they may not see: how many, how
 * they came, and where, and nothing of what they are (a private channel's name shows to its members only).
 */
function withheldLines(withheld: WithheldReview[]): string[] {
  const byChannel = new Map<string, WithheldReview[]>();
  for (const w of withheld) {
    const group = byChannel.get(w.channelId);
    if (group) group.push(w);
    else byChannel.set(w.channelId, [w]);
  }
  const lines = [...byChannel].slice(0, HOME_MAX_WITHHELD_CHANNELS).map(([channelId, reviews]) => {
    const whys = new Set(reviews.map((r) => r.why));
    const [only] = whys.size === 1 ? whys : [undefined];
    const how = only === "handed" ? "handed to you" : only === "escalated" ? "escalated to you" : "for you";
    const [what, its, it] = reviews.length === 1 ? [`A review ${how} waits`, "its", "it is"] : [`${reviews.length} reviews ${how} wait`, "their", "they are"];
    return `🔒 ${what} in <#${channelId}>, a channel you are not in (or Slack could not confirm you are just now): ${its} content is not shown here. Join the channel (or ask a member to add you, if it is private); then ${it} listed here with Approve.`;
  });
  const more = byChannel.size - HOME_MAX_WITHHELD_CHANNELS;
  return more > 0 ? [...lines, `…and reviews in ${more} more such channels.`] : lines;
}

export function homeView(p: HomeParams): types.HomeView {
  const blocks: types.KnownBlock[] = [header("Crewline")];
  if (p.notice?.trim()) blocks.push(section(p.notice.trim()));

  const withheld = p.withheld ?? [];
  const waiting = p.reviews.length + withheld.length;
  blocks.push(header(waiting ? `Reviews waiting for you (${waiting})` : "Reviews waiting for you"));
  if (waiting === 0) blocks.push(context("Nothing to decide right now."));
  for (const r of p.reviews.slice(0, HOME_MAX_REVIEWS)) {
    const task = `*${name(r.taskName)}*${r.round > 1 ? ` (round ${r.round})` : ""}`;
    const open = r.permalink ? `<${r.permalink}|Open the thread>` : `in <#${r.channelId}>`;
    const notes = r.notes?.length ? `\n${r.notes.slice(0, 3).join("\n")}` : "";
    const item = section(`${task} · ${name(r.crewName)} · waiting ${formatDuration(r.waitingMs)}${notes}\n${open}`) as types.SectionBlock;
    if (r.approveReviewId && r.approveReviewId.length <= LIMITS.buttonValue)
      item.accessory = { type: "button", action_id: HOME_APPROVE_ACTION, style: "primary", value: r.approveReviewId, text: { type: "plain_text", text: "Approve" } };
    else if (r.approveFlowRequestId && r.approveFlowRequestId.length <= LIMITS.buttonValue)
      item.accessory = { type: "button", action_id: HOME_FLOW_APPROVE_ACTION, style: "primary", value: r.approveFlowRequestId, text: { type: "plain_text", text: "Approve" } };
    blocks.push(item);
  }
  blocks.push(...more(p.reviews.length - HOME_MAX_REVIEWS, "reviews"));
  blocks.push(...packed(withheldLines(withheld)));
  blocks.push({ type: "divider" });

  blocks.push(header("Your recent runs"));
  if (p.runs.length === 0) blocks.push(context("You haven't started a run yet. Use `/crew` in a channel."));
  const runLines = p.runs.slice(0, HOME_MAX_RUNS).map((run) => {
    const { emoji, label: text } = runStateLabel(run.state);
    const label = `${emoji} ${escapeMrkdwn(text.toLowerCase())}`;
    const where = run.permalink ? `<${run.permalink}|thread>` : `<#${run.channelId}>`;
    const id = run.kickoffId ? ` · \`${escapeMrkdwn(truncatePlain(run.kickoffId, 80))}\`` : "";
    return `• *${name(run.crewName)}* — ${label} · started ${formatDuration(p.now.getTime() - run.startedAt.getTime())} ago · ${where}${id}`;
  });
  blocks.push(...packed(runLines), ...more(p.runs.length - HOME_MAX_RUNS, "runs"));
  blocks.push({ type: "divider" });

  blocks.push(header("Crews you can start"));
  if (p.crews.length === 0) blocks.push(context("No crews are set up yet. Ask an admin to add one."));
  const crewLines = p.crews.slice(0, HOME_MAX_CREWS).map((crew) => {
    const where = crew.channels
      ? crew.channels
          .slice(0, 10)
          .map((c) => `<#${c}>`)
          .join(", ") + (crew.channels.length > 10 ? ", …" : "")
      : "any channel";
    return `• *${name(crew.name)}* — ${where}`;
  });
  blocks.push(...packed(crewLines), ...more(p.crews.length - HOME_MAX_CREWS, "crews"));
  blocks.push(context("Start a run with `/crew` in a channel; `/crew help` lists everything it can do."));
  if (p.flows?.length) {
    const hooks = p.flows.slice(0, 10).map((f) => `\`${name(f.name)}\` → \`${escapeMrkdwn(truncatePlain(f.webhookUrl, 300))}\``);
    blocks.push(context(`Flows answered here. Admins: each flow's webhook URL goes into its dashboard (Settings → Human in the Loop): ${hooks.join(" · ")}`));
  }

  return { type: "home", blocks: blocks.slice(0, LIMITS.modalBlocks) };
}
