import type { types } from "@slack/bolt";
import { describe, expect, it } from "vitest";
import { CREW_PICKER_VIEW_CALLBACK, CREW_SELECT_ACTION, crewNameFromOptionValue, inputBlockId, KICKOFF_VIEW_CALLBACK, SOURCE_TEXT_BLOCK } from "./ids.js";
import { crewPickerView, inputForMessageText, kickoffErrorView, kickoffFormView, loadingView, missingInputErrors, readViewInputs, visibleFormInputs } from "./kickoff.js";
import { modalLimitViolations } from "./limits.js";

const huge = (n: number) => "Ü😀 x".repeat(Math.ceil(n / 5)).slice(0, n);
const inputs = (view: types.ModalView) => view.blocks.filter((b): b is types.InputBlock => b.type === "input");
const texts = (view: types.ModalView) => JSON.stringify(view.blocks);

describe("loadingView", () => {
  it("is a cancel-only modal for the kickoff callback", () => {
    const view = loadingView();
    expect(view).toMatchObject({ type: "modal", callback_id: KICKOFF_VIEW_CALLBACK, title: { text: "Start a crew" }, close: { text: "Cancel" } });
    expect(view.submit).toBeUndefined();
    expect(texts(view)).toContain("Loading the crew's inputs…");
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("fits a long custom title in 24 chars", () => {
    const view = loadingView(huge(500));
    expect(view.title.text.length).toBeLessThanOrEqual(24);
    expect(modalLimitViolations(view)).toEqual([]);
  });
});

describe("crewPickerView", () => {
  it("lists crews in a dispatching static select", () => {
    const view = crewPickerView([{ name: "Research", description: "Finds things" }, { name: "Writer" }], "meta");
    expect(view).toMatchObject({ callback_id: CREW_PICKER_VIEW_CALLBACK, submit: { text: "Next" }, private_metadata: "meta" });
    const [block] = inputs(view);
    expect(block?.dispatch_action).toBe(true);
    expect(block?.element).toMatchObject({
      type: "static_select",
      action_id: CREW_SELECT_ACTION,
      options: [
        { text: { text: "Research" }, value: "Research", description: { text: "Finds things" } },
        { text: { text: "Writer" }, value: "Writer" },
      ],
    });
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("caps options at 100, with a note, and keeps long names resolvable", () => {
    const crews = Array.from({ length: 130 }, (_, i) => ({ name: `${huge(300)}${i}`, description: huge(5000) }));
    const view = crewPickerView(crews, "m");
    const element = inputs(view)[0]?.element as types.StaticSelect;
    expect(element.options).toHaveLength(100);
    expect(texts(view)).toContain("Showing 100 of 130 crews");
    expect(
      crewNameFromOptionValue(
        element.options?.[7]?.value ?? "",
        crews.map((c) => c.name),
      ),
    ).toBe(crews[7]?.name);
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("explains when there is nothing to pick", () => {
    const view = crewPickerView([], "m");
    expect(view.submit).toBeUndefined();
    expect(modalLimitViolations(view)).toEqual([]);
  });
});

describe("kickoffFormView", () => {
  const crewInputs = [
    { name: "topic", description: "What to research", required: true },
    { name: "current_year", required: false },
  ];

  it("has one input block per declared input", () => {
    const view = kickoffFormView({ crewName: "Research crew", inputs: crewInputs, metadata: "{}", values: { topic: "AI" } });
    expect(view).toMatchObject({
      callback_id: KICKOFF_VIEW_CALLBACK,
      title: { text: "Start a crew" },
      submit: { text: "Start" },
      close: { text: "Cancel" },
      private_metadata: "{}",
    });
    expect(texts(view)).toContain("*Research crew*");
    const [topic, year] = inputs(view);
    expect(topic).toMatchObject({
      block_id: "in:topic",
      optional: false,
      label: { text: "Topic" },
      hint: { text: "What to research" },
      element: { type: "plain_text_input", action_id: "value", multiline: true, max_length: 3000, initial_value: "AI" },
    });
    expect(year).toMatchObject({ block_id: "in:current_year", optional: true, label: { text: "Current year" } });
    expect(year?.hint).toBeUndefined();
    expect((year?.element as types.PlainTextInput).initial_value).toBeUndefined();
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("is still submittable with no inputs", () => {
    const view = kickoffFormView({ crewName: "c", inputs: [], metadata: "" });
    expect(view.submit?.text).toBe("Start");
    expect(texts(view)).toContain("This crew needs no inputs.");
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("shows the first 98 of too many inputs and says how many were left out", () => {
    const many = Array.from({ length: 150 }, (_, i) => ({ name: `input_${i}`, required: false }));
    const view = kickoffFormView({ crewName: "c", inputs: many, metadata: "" });
    expect(inputs(view)).toHaveLength(98);
    expect(view.blocks).toHaveLength(100);
    expect(texts(view)).toContain("52 more inputs don't fit");
    expect(visibleFormInputs(many)).toHaveLength(98);
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("keeps all 99 inputs when they fit", () => {
    const many = Array.from({ length: 99 }, (_, i) => ({ name: `input_${i}`, required: true }));
    const view = kickoffFormView({ crewName: "c", inputs: many, metadata: "" });
    expect(inputs(view)).toHaveLength(99);
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("says why it is shown again in the block that names the crew: all 99 inputs still fit, and a huge notice is cut", () => {
    const many = Array.from({ length: 99 }, (_, i) => ({ name: `input_${i}`, required: true }));
    const view = kickoffFormView({ crewName: "c", inputs: many, metadata: "", notice: `⚠️ The crew refused this input: ${huge(10_000)}` });
    expect(inputs(view)).toHaveLength(99);
    expect(view.blocks).toHaveLength(100);
    expect((view.blocks[0] as types.SectionBlock).text?.text).toMatch(/^Crew: \*c\*\n⚠️ The crew refused this input/);
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("respects every limit with huge names, descriptions and values", () => {
    const big = Array.from({ length: 120 }, (_, i) => ({ name: `${huge(5000)}${i}`, description: huge(10_000), required: true }));
    const values = Object.fromEntries(big.map((b) => [b.name, huge(10_000)]));
    const view = kickoffFormView({ crewName: huge(100_000), inputs: big, metadata: "m".repeat(3000), values });
    expect(modalLimitViolations(view)).toEqual([]);
    const ids = inputs(view).map((b) => b.block_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids[0]).toBe(inputBlockId(big[0]?.name ?? ""));
  });

  it("refuses private_metadata over 3000 chars", () => {
    expect(() => kickoffFormView({ crewName: "c", inputs: [], metadata: "m".repeat(3001) })).toThrow(/private_metadata/);
  });
});

describe("kickoffErrorView", () => {
  it("shows the error as plain text with only a Close button", () => {
    const view = kickoffErrorView({ crewName: "Research", message: "Crew unreachable <401>" });
    expect(view.submit).toBeUndefined();
    expect(view.close?.text).toBe("Close");
    expect(view.blocks[1]).toEqual({ type: "section", text: { type: "plain_text", text: "Crew unreachable <401>" } });
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("fits huge messages and names", () => {
    const view = kickoffErrorView({ crewName: huge(10_000), message: huge(50_000) });
    expect(modalLimitViolations(view)).toEqual([]);
    expect(modalLimitViolations(kickoffErrorView({ message: "  " }))).toEqual([]);
  });
});

describe("reading the form back", () => {
  const names = ["topic", "current_year", "x".repeat(400)];

  it("reads trimmed values by input name, missing as empty", () => {
    const state = {
      [inputBlockId("topic")]: { value: { value: "  AI agents \n" } },
      [inputBlockId("current_year")]: { value: { value: null } },
      [inputBlockId("x".repeat(400))]: { value: { value: "long" } },
    };
    expect(readViewInputs(state, [...names, "absent"])).toEqual({ topic: "AI agents", current_year: "", [names[2] ?? ""]: "long", absent: "" });
  });

  it("keys errors by block id for the inputs in the form", () => {
    expect(missingInputErrors(["topic", "hidden"], names)).toEqual({ "in:topic": "This field is required by the crew." });
  });
});

describe("inputForMessageText", () => {
  const named = (...names: string[]) => names.map((name) => ({ name }));
  it("picks the first input whose name says it takes text, in any naming style", () => {
    expect(inputForMessageText(named("audience", "topic"))).toBe("topic");
    expect(inputForMessageText(named("year", "message_text", "query"))).toBe("message_text");
    expect(inputForMessageText(named("year", "userQuery"))).toBe("userQuery");
    expect(inputForMessageText(named("year", "SOURCE_CONTENT"))).toBe("SOURCE_CONTENT");
    expect(inputForMessageText(named("input"))).toBe("input");
  });

  it("falls back to the first input, and to none without inputs; a word inside another does not count", () => {
    expect(inputForMessageText(named("audience", "year"))).toBe("audience");
    expect(inputForMessageText(named("year", "contention"))).toBe("year");
    expect(inputForMessageText([])).toBeUndefined();
  });
});

describe("crewPickerView opened from a message", () => {
  it("carries the message's text in a field of its own, cut to what a text box holds", () => {
    const view = crewPickerView([{ name: "a" }, { name: "b" }], "{}", huge(5000));
    const source = inputs(view).find((b) => b.block_id === SOURCE_TEXT_BLOCK)!;
    expect(source.optional).toBe(true);
    const initial = (source.element as types.PlainTextInput).initial_value!;
    expect(initial.length).toBeLessThanOrEqual(3000);
    expect(huge(5000).startsWith(initial)).toBe(true);
    expect(modalLimitViolations(view)).toEqual([]);
  });

  it("has no such field when opened with /crew", () => {
    expect(inputs(crewPickerView([{ name: "a" }, { name: "b" }], "{}")).map((b) => b.block_id)).not.toContain(SOURCE_TEXT_BLOCK);
  });
});
