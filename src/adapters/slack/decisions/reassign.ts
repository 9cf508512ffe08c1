// Reassign, clicked on a pending review or flow request: whoever may decide it picks a person and
// gives a reason in a modal; it is handed to that person (its use case), who is mentioned under it, may
// decide it, and sees it on their App Home at once. Only someone who could act on it may be picked
// (mayReceiveReassignment); anyone else is refused on the modal's person field, saying why.
import type { App } from "@slack/bolt";
import { z } from "zod";
import { sanitizeText } from "../../../text/sanitize.js";
import { type AccessPorts, mayReceiveReassignment, type ReassignRefusal, type ReassignSubject } from "../../../usecases/access.js";
import { within } from "../../../usecases/within.js";
import { accessPorts } from "../access.js";
import { REASSIGN_REASON_ACTION, REASSIGN_REASON_BLOCK, REASSIGN_USER_ACTION, REASSIGN_USER_BLOCK, reassignModal, userMention } from "../blocks/index.js";
import type { FeatureDeps } from "../deps.js";
import { clickFacts, tellPrivately } from "../private-reply.js";
import { spendOnView } from "../views.js";
import { decisionClick } from "./edit.js";
import { openDecisionForm, sealDecisionForm } from "./form-seal.js";
import { forEachKind, type KindPort, type Subject } from "./kinds.js";
import type { DecisionKind } from "./replies.js";

const reassignSubmission = z.object({
  user: z.object({ id: z.string() }),
  view: z.object({
    private_metadata: z.string().max(1000),
    state: z.object({
      values: z.record(z.string(), z.record(z.string(), z.object({ value: z.string().nullish(), selected_user: z.string().nullish() }).passthrough())),
    }),
  }),
});

const USER_ID = /^[UW][A-Z0-9]{2,}$/;

/**
 * How long after a submission arrives the person picked may still be checked (users.info, channel
 * members): Slack drops a view submission not answered within 3 s, and then shows the user an error.
 */
const ANSWER_WITHIN_MS = 2_500;

/** What the person field says when the person picked may not be handed it (a modal error is plain text: no mentions). */
function refusalText(why: ReassignRefusal, kind: DecisionKind): string {
  const place = kind === "flow" ? "this request's channel" : "this run's channel";
  switch (why) {
    case "unknown":
      return "Crewline could not check that person just now; try again in a moment.";
    case "bot":
      return "That's a bot: reassign to a person.";
    case "deactivated":
      return "That person's account is deactivated: reassign to someone active.";
    case "other_organisation":
      return "That person is of another organisation (a guest in a shared channel), who may not decide it: reassign to someone of this workspace.";
    case "self_approval":
      return "That person started this run, and this crew does not let a run's starter approve it: reassign to someone else.";
    case "cannot_see":
      return `That person is not in ${place}, so they could not see it.`;
  }
}

/** Whether the person may be handed it, given up as unknown (refused) once the submission's answer cannot wait longer. */
async function targetCheck(deps: FeatureDeps, kind: DecisionKind, subject: ReassignSubject, to: string, access: AccessPorts, until: number): Promise<ReassignRefusal | undefined> {
  const check = mayReceiveReassignment(access, subject, to)
    .then((may) => (may.ok ? undefined : may.why))
    .catch((err: unknown) => {
      deps.log.warn("could not check the person picked to reassign to", { kind, err });
      return "unknown" as const;
    });
  return within(check, until - Date.now(), () => {
    deps.log.warn("could not check the person picked to reassign to in time", { kind });
    return "unknown" as const;
  });
}

export function registerDecisionReassign(app: App, deps: FeatureDeps): void {
  forEachKind(deps, (kind) => registerReassign(app, deps, kind));
}

function registerReassign<S extends Subject>(app: App, deps: FeatureDeps, kind: KindPort<S>): void {
  const w = kind.words;
  app.action(kind.ids.reassign, async ({ ack, body, client, context }) => {
    await ack();
    const click = decisionClick.safeParse(body);
    if (!click.success) return void deps.log.warn("reassign click with an unexpected payload", { kind: kind.kind });
    const { user, actions, trigger_id } = click.data;
    const { channel, messageTs, tell } = clickFacts(deps.log, client, click.data);
    const found = await kind.find(actions[0]!.value);
    const access = accessPorts(client, deps, context, body);
    // Only from its own message.
    if (!found || !channel || !messageTs || !(await kind.mayAct(found, { userId: user.id, channelId: channel, messageTs }, access))) return tell(w.notThisReassign);
    if (found.state !== "pending") return tell(`This ${w.noun} is no longer ${w.waiting}, so it cannot be reassigned.`);
    const may = await kind.mayReassign(found, user.id, access);
    if (!may.ok) return tell(`Only ${may.who ?? `people who may ${w.verb} this ${w.noun}`} may reassign it.`);
    const flow = kind.kind === "flow" ? ({ callbackId: kind.ids.reassignView, what: "request" } as const) : {};
    await spendOnView(deps, kind.team(found)?.teamId, "views.open");
    // The form is this person's, for this message (form-seal.ts): its submission is checked against both.
    const metadata = sealDecisionForm(deps.formKey, { r: found.id, u: user.id, c: channel, m: messageTs, h: 0 });
    await client.views.open({ trigger_id, view: reassignModal({ metadata, taskName: found.fullTitle ?? found.title, ...flow }) }).catch(async (err) => {
      deps.log.warn("could not open the reassign form", { kind: kind.kind, err });
      await tell("I could not open the reassign form. Please try again in a moment.");
    });
  });

  app.view(kind.ids.reassignView, async ({ ack, body, client, context }) => {
    const until = Date.now() + ANSWER_WITHIN_MS;
    const submission = reassignSubmission.safeParse(body);
    if (!submission.success) return void (await ack());
    const { user, view } = submission.data;
    const refuse = (block: string, text: string) => ack({ response_action: "errors", errors: { [block]: text } });
    const to = view.state.values[REASSIGN_USER_BLOCK]?.[REASSIGN_USER_ACTION]?.selected_user ?? "";
    const reason = sanitizeText(view.state.values[REASSIGN_REASON_BLOCK]?.[REASSIGN_REASON_ACTION]?.value ?? "").trim();
    if (!USER_ID.test(to)) return void (await refuse(REASSIGN_USER_BLOCK, `Choose the person who should ${w.verb} it.`));
    if (!reason) return void (await refuse(REASSIGN_REASON_BLOCK, `Say why they should ${w.verb} it.`));
    const facts = openDecisionForm(deps.formKey, view.private_metadata, user.id);
    if (!facts) return void (await refuse(REASSIGN_USER_BLOCK, `This form was opened by someone else or has expired: nothing was reassigned.`));
    const found = await kind.find(facts.r);
    if (!found) return void (await refuse(REASSIGN_USER_BLOCK, `This ${w.noun} no longer exists.`));
    const access = accessPorts(client, deps, context, body);
    const place = { userId: user.id, channelId: facts.c, messageTs: facts.m };
    if (!(await kind.mayAct(found, place, access)) || !(await kind.mayReassign(found, user.id, access)).ok)
      return void (await refuse(REASSIGN_USER_BLOCK, `You may not reassign this ${w.noun}.`));
    if (found.state !== "pending") return void (await refuse(REASSIGN_USER_BLOCK, `This ${w.noun} is no longer ${w.waiting}.`));
    const why = await targetCheck(deps, kind.kind, kind.reassignSubject(found), to, access, until);
    if (why) return void (await refuse(REASSIGN_USER_BLOCK, refusalText(why, kind.kind)));
    await ack();
    const outcome = await kind.reassign(found, { by: user.id, to, reason });
    // Published with the token of its workspace (installed in many, the app-level client is not it).
    if (outcome === "reassigned") await deps.publishHome?.(to, kind.team(found));
    if (outcome === "same_person") {
      await tellPrivately(client, deps.log, { ...kind.replyPlace(found), user: user.id }, `This ${w.noun} is reassigned to ${userMention(to)} already, so nothing changed.`);
    }
    if (outcome === "not_pending") {
      await tellPrivately(client, deps.log, { ...kind.replyPlace(found), user: user.id }, `The ${w.noun} was ${w.done} before it could be reassigned.`);
    }
  });
}
