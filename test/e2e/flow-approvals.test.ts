// A flow request needing several approvals counts each approve-like outcome apart: the flow receives
// the outcome N distinct people chose, with their notes, and never one whose approvers were pooled with
// another's. Through signed requests to /slack/events, the Slack stand-in and the local flow deployment.
import { afterEach, expect, it } from "vitest";
import { clickFlow, FLOW_CHANNEL, type FlowHarness, flowRow, type PendingFlowRequest, pendingFlowRequest, startFlowHarness } from "../support/flows.js";
import { USER as ALICE, eventually } from "../support/harness.js";
import { prismaOf } from "../support/prisma.js";

let f: FlowHarness | undefined;
afterEach(async () => {
  await f?.close();
  f = undefined;
});

const BOB = "U0BOB";
const CAROL = "U0CAROL";
const EMIT = ["approved_with_minor_edits", "approved", "rejected"];

const requestText = (f: FlowHarness, req: PendingFlowRequest) => JSON.stringify(f.h.slack.messages(FLOW_CHANNEL).find((m) => m.ts === req.msg.ts)?.blocks ?? []);
const ephemeralTo = (f: FlowHarness, user: string, pattern: RegExp) =>
  f.h.slack.callsTo("chat.postEphemeral").find((c) => c.args.user === user && pattern.test(String(c.args.text)));

it("approvals for different approve-like outcomes are not pooled: the flow receives the outcome two people chose, with both notes", async () => {
  f = await startFlowHarness({ flow: { approvals: 2 } });
  await f.flow.send({ emit: EMIT });
  const req = await pendingFlowRequest(f.h);

  await clickFlow(f.h, req, "approved_with_minor_edits", "fix the typo in para 2", ALICE);
  await eventually(() => ephemeralTo(f!, ALICE, /1 of 2 approvals/), { what: "Alice's approval" });
  // Bob's approval is for another outcome: it counts toward that one, and nothing is answered yet.
  await clickFlow(f.h, req, "approved", "", BOB);
  await eventually(() => ephemeralTo(f!, BOB, /1 of 2 approvals/), { what: "Bob's approval" });
  await f.h.settled();
  expect(f.flow.answers).toHaveLength(0);
  expect((await flowRow(f.h, req.id)).state).toBe("pending");
  const pending = requestText(f, req);
  expect(pending).toContain(`1 of 2 approvals for *approved_with_minor_edits*: <@${ALICE}>`);
  expect(pending).toContain(`1 of 2 approvals for *approved*: <@${BOB}>`);

  await clickFlow(f.h, req, "approved_with_minor_edits", "shorten the title", CAROL);
  await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
  const feedback = f.flow.answers[0]!.feedback as string;
  expect(feedback).toMatch(/^approved_with_minor_edits\n\n/);
  expect(feedback).toContain(`${ALICE}: fix the typo in para 2`);
  expect(feedback).toContain(`${CAROL}: shorten the title`);
  expect(feedback).not.toContain(BOB);

  await f.h.settled();
  const row = await eventually(
    async () => {
      const r = await flowRow(f!.h, req.id);
      return r.state === "answered" ? r : undefined;
    },
    { what: "the request answered" },
  );
  expect(row).toMatchObject({ outcome: "approved_with_minor_edits", decidedBy: CAROL });
  const answered = await eventually(() => (/The flow received/.test(requestText(f!, req)) ? requestText(f!, req) : undefined), { what: "the answered message" });
  expect(answered).toContain("The flow received *approved_with_minor_edits*");
  expect(answered).toContain(`2 of 2 approvals: <@${ALICE}>, <@${CAROL}>`);
  expect(answered).not.toContain(BOB);
});

it("approving again with another outcome moves the person's approval to it", async () => {
  f = await startFlowHarness({ flow: { approvals: 2 } });
  await f.flow.send({ emit: EMIT });
  const req = await pendingFlowRequest(f.h);

  await clickFlow(f.h, req, "approved_with_minor_edits", "fix the typo", ALICE);
  await eventually(() => ephemeralTo(f!, ALICE, /1 of 2 approvals/), { what: "Alice's approval" });
  await clickFlow(f.h, req, "approved", "", ALICE);
  await eventually(() => ephemeralTo(f!, ALICE, /replaces your earlier/), { what: "Alice's approval moved" });
  const rows = await prismaOf(f.h.bot.database).flowApproval.findMany({ where: { flowRequestId: req.id } });
  expect(rows.map((r) => [r.userId, r.outcome])).toEqual([[ALICE, "approved"]]);

  // Bob completes "approved" with her: the first outcome has no approval left.
  await clickFlow(f.h, req, "approved", "", BOB);
  await eventually(() => f!.flow.answers.length === 1, { what: "the flow's answer" });
  expect(f.flow.answers[0]!.feedback).toMatch(/^approved\n\n/);
  expect(f.flow.answers[0]!.feedback).toContain(`Approved by 2 reviewers: ${ALICE}, ${BOB}.`);
});
