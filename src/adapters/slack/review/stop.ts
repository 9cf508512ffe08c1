// Stop, clicked on a run's announcement (the click must come from that very message), and Stop
// following, clicked in the private answer a crew without POST /stop gets. Both go through the run
// stopper (usecases/stops.ts), which applies the rule of a decision and makes the stop happen once;
// the asker hears the outcome privately. `/crew stop <kickoff id>` (kickoff/command.ts) answers with
// the same words.
import type { App, types } from "@slack/bolt";
import { z } from "zod";
import type { AccessPorts, Asker } from "../../../usecases/access.js";
import type { StopOutcome } from "../../../usecases/stops.js";
import { accessPorts } from "../access.js";
import { cannotStopMessage, escapeMrkdwn, runStateLabel, STOP_ACTION, STOP_FOLLOWING_ACTION, truncatePlain, unknownKickoffText, userMention } from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import { clickedMessage, clickFacts, payloadIssues } from "../private-reply.js";

/** A private answer: words, and blocks when there is a button to offer. */
export interface StopReply {
  text: string;
  blocks?: types.KnownBlock[];
}

const STOP_NOT_RECORDED = "⚠️ Your stop was not recorded: Crewline could not reach its database. Nothing was sent to the crew; please try again in a moment.";

const stopClick = z.object({
  ...clickedMessage,
  actions: z.array(z.object({ action_id: z.string(), value: z.string().max(100) })).min(1),
});

export function registerStopActions(app: App, deps: FeatureDeps): void {
  for (const actionId of [STOP_ACTION, STOP_FOLLOWING_ACTION]) {
    app.action(actionId, async ({ ack, body, client, context }) => {
      await ack();
      const click = stopClick.safeParse(body);
      if (!click.success) return void deps.log.warn("stop click with an unexpected payload", { issues: payloadIssues(click.error) });
      const { user, actions } = click.data;
      const { channel: channelId, messageTs, tell: say } = clickFacts(deps.log, client, click.data);
      const tell = (reply: StopReply) => say(reply.text, reply.blocks);
      const executionId = actions[0]!.value;
      const asker: Asker = { userId: user.id, ...(channelId ? { channelId } : {}) };
      let outcome: StopOutcome;
      try {
        const access = accessPorts(client, deps, context, body);
        outcome =
          actionId === STOP_ACTION
            ? // Stop is on the announcement: the click must come from that message.
              await deps.lifecycle.stops.stop({ executionId, click: { channelId, messageTs } }, asker, access)
            : // Stop following is in a private answer (no message of the run to check): the access rule alone decides.
              await deps.lifecycle.stops.stopFollowing(executionId, asker, access);
      } catch (err) {
        deps.log.error("stop click could not be recorded", { err });
        return void (await tell({ text: STOP_NOT_RECORDED }));
      }
      if (outcome.kind === "not_this_message" || outcome.kind === "unknown") deps.log.warn("stop click refused", { userId: user.id, why: outcome.kind });
      await tell(stopReply(outcome));
    });
  }
}

/** What the asker of a stop is told privately (a button click or `/crew stop`); `kickoffId`: the id they typed. */
function stopReply(outcome: StopOutcome, kickoffId?: string): StopReply {
  const text = (t: string): StopReply => ({ text: t });
  const crew = (run: { crewName: string }) => `*${escapeMrkdwn(truncatePlain(run.crewName, 150))}*`;
  switch (outcome.kind) {
    case "unknown":
      return text(kickoffId !== undefined ? unknownKickoffText(kickoffId) : "I can't find this run, so nothing was sent to the crew.");
    case "not_this_message":
      return text("This button does not belong to the run it names, so nothing was sent to the crew.");
    case "not_allowed":
      return text(`Only the run's starter (${userMention(outcome.run.userId)}) and whoever may decide its reviews may stop it, so nothing was sent to the crew.`);
    case "not_started":
      return text(`The run of ${crew(outcome.run)} is still starting (the crew has not answered its kickoff yet), so there is nothing to stop yet. Try again in a moment.`);
    case "ended": {
      const { run } = outcome;
      if (run.state === "stopped") return text(`${run.stoppedBy ? userMention(run.stoppedBy) : "Someone"} already stopped this run of ${crew(run)}.`);
      if (run.state === "abandoned") return text(`${run.stoppedBy ? userMention(run.stoppedBy) : "Someone"} already stopped following this run of ${crew(run)}.`);
      return text(`This run of ${crew(run)} has already ended (${escapeMrkdwn(runStateLabel(run.state).label.toLowerCase())}), so there is nothing to stop.`);
    }
    case "stopping":
      return text(`${outcome.by ? userMention(outcome.by) : "Someone"} is stopping this run of ${crew(outcome.run)} right now.`);
    case "stopped":
      return text(`⏹️ You stopped the run of ${crew(outcome.run)}. Its open reviews are closed and nothing more is posted about it.`);
    case "abandoned":
      return text(
        `⏹️ Crewline no longer follows this run of ${crew(outcome.run)}: its open reviews are closed and nothing more is posted about it. The crew itself may still finish.`,
      );
    case "not_supported":
      return cannotStopMessage(outcome.run.id, outcome.run.crewName);
    case "crew_says_ended":
      return text(`The crew says this run of ${crew(outcome.run)} had already ended, so there was nothing to stop. Its outcome shows here as soon as Crewline hears it.`);
    case "failed":
      return text(`The stop did not reach the crew, so the run of ${crew(outcome.run)} goes on. ${escapeMrkdwn(outcome.message)} Please try again in a moment.`);
    case "refused":
      return text(`The crew refused to stop the run of ${crew(outcome.run)}, so it goes on. ${escapeMrkdwn(outcome.message)}`);
    case "unconfirmed":
      // Neither "it goes on" nor "stopped": the crew may have taken it, and says so by its status or webhook.
      return text(
        `The crew did not confirm the stop of ${crew(outcome.run)}: it may have taken it. Its outcome shows here as soon as Crewline hears it (check the thread before trying again).`,
      );
    case "taken_not_recorded":
      return text(
        `The crew took your stop of ${crew(outcome.run)}, but Crewline could not record it (its database did not answer), so the run may still show as running here for a while.`,
      );
  }
}

/** Answers `/crew stop <kickoff id>` privately (through the command's response_url). */
export async function stopCommandReply(deps: FeatureDeps, kickoffId: string, asker: Asker, access: AccessPorts): Promise<StopReply> {
  try {
    return stopReply(await deps.lifecycle.stops.stop({ kickoffId }, asker, access), kickoffId);
  } catch (err) {
    deps.log.error("stop command could not be recorded", { err });
    return { text: STOP_NOT_RECORDED };
  }
}
