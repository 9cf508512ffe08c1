// `npm run playground` in a real browser (Debian's Chromium, driven by playwright-core; no browser
// download): start a crew from /crew, reject a review with feedback as one reviewer, see round 2,
// approve as another reviewer, see the completion notice, open App Home; start a crew from a message
// with the message shortcut and approve its review by replying in the thread; the run's live plan in its thread.
// Skipped (with a note) when /usr/bin/chromium is missing; .ci/run installs it.
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type BrowserContext, chromium, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const hasChromium = fs.existsSync(CHROMIUM);
// `npm run test:browser` (and so .ci/run) insists on a browser; `npm test` skips without one.
if (!hasChromium && process.env.CREWLINE_REQUIRE_CHROMIUM === "1") throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium`);
// The playground keeps its own embedded database: the PostgreSQL pass (npm run test:pg) has nothing to add.
const onPostgresPass = process.env.CREWLINE_TEST_DATABASE === "postgres";
/** Screenshots land here; UPDATE_SCREENSHOTS=1 writes the README's copies in docs/screenshots. */
const SHOTS = process.env.UPDATE_SCREENSHOTS === "1" ? path.join(ROOT, "docs", "screenshots") : fs.mkdtempSync(path.join(os.tmpdir(), "crewline-shots-"));

if (!hasChromium) console.warn(`playground browser test skipped: no Chromium at ${CHROMIUM} (apt-get install -y chromium)`);

describe.skipIf(!hasChromium || onPostgresPass)("playground in a real browser", () => {
  let playground: ChildProcess | undefined;
  let browser: BrowserContext | undefined;
  let page: Page;
  let url = "";
  let output = "";
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-playground-"));
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "crewline-chromium-"));

  beforeAll(async () => {
    playground = spawn(process.execPath, ["--import", "tsx", path.join(ROOT, "src", "playground", "main.ts")], {
      cwd: ROOT,
      env: { ...process.env, PLAYGROUND_PORT: "0", DATA_DIR: dataDir, PLAYGROUND_TASK_DELAY_MS: "400", LOG_LEVEL: "error", CREW_BASE_URL: "", CREWS_FILE: "", DATABASE_URL: "" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    playground.stdout!.on("data", (c: Buffer) => (output += c.toString()));
    playground.stderr!.on("data", (c: Buffer) => (output += c.toString()));
    const deadline = Date.now() + 90_000;
    while (!url) {
      url = /Crewline playground: (http:\/\/127\.0\.0\.1:\d+)\//.exec(output)?.[1] ?? "";
      if (playground.exitCode !== null || Date.now() > deadline) throw new Error(`the playground did not start:\n${output}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // A fresh profile (--user-data-dir) every run.
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      viewport: { width: 1360, height: 860 },
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    page = browser.pages()[0] ?? (await browser.newPage());
    page.setDefaultTimeout(20_000);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    if (playground && playground.exitCode === null) {
      const exited = new Promise((r) => playground!.once("exit", r));
      playground.kill("SIGTERM");
      await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
    }
    fs.rmSync(dataDir, { recursive: true, force: true });
    fs.rmSync(profile, { recursive: true, force: true });
  }, 30_000);

  const actAs = (user: string) => page.getByTestId("user-switcher").selectOption(user);
  const thread = () => page.getByTestId("thread");
  const review = (round: number): Locator =>
    thread()
      .getByTestId("message")
      // The review messages, not the live plan (its card names the task too) nor a notice about them.
      .filter({ hasNot: page.getByTestId("plan") })
      .filter({ hasText: "writing_task" })
      .filter({ hasText: `round ${round}` })
      .filter({ hasNotText: /reassigned writing_task/ });

  it("runs a crew from /crew through a rejected and an approved review to the completion notice and App Home", async () => {
    await page.goto(`${url}/?user=U0STARTER`);
    await page.getByTestId("composer").fill("/crew");
    await page.getByTestId("composer").press("Enter");

    // The kickoff form, built from the crew's GET /inputs.
    const modal = page.getByTestId("modal");
    await expect.poll(() => modal.locator(".block.input").count()).toBe(2);
    await modal.locator(".block.input", { hasText: "Topic" }).locator("input, textarea").fill("Tide pools");
    await modal.locator(".block.input", { hasText: "Audience" }).locator("input, textarea").fill("Curious kids");
    await modal.getByRole("button", { name: "Start" }).click();
    await expect.poll(() => modal.textContent()).toContain("is running");
    await modal.getByRole("button", { name: "Close" }).click();

    // The announcement in the channel, with the inputs.
    const announcement = page.getByTestId("timeline").getByTestId("message").filter({ hasText: "started crew" });
    await expect.poll(() => announcement.textContent()).toContain("Tide pools");
    expect(await announcement.textContent()).toContain("Sam Starter");

    // The writing task waits for a review in the thread.
    await announcement.locator(".replies").click();
    await review(1).getByRole("button", { name: "Reject", exact: true }).waitFor();

    // The run's live plan in the thread: one card per task so far, the reviewed one waiting for its decision.
    const plan = thread().getByTestId("plan");
    await expect.poll(() => plan.locator("[data-testid=task-card][data-status=pending]").count()).toBe(1);
    expect(await plan.getByTestId("task-card").first().textContent()).toContain("research_task");
    expect(await plan.getByTestId("task-card").first().getAttribute("data-status")).toBe("complete");
    expect(await plan.textContent()).toContain("newsletter");
    await plan.scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(SHOTS, "live-plan.png") });

    // A reviewer rejects it with feedback; the crew runs the task again with it.
    await actAs("U0REVIEWA");
    await review(1).locator("textarea").fill("Shorter sentences, please");
    await review(1).getByRole("button", { name: "Reject", exact: true }).click();
    await expect.poll(() => review(1).textContent()).toContain("Rejected by @Riya Reviewer");
    await review(2).getByRole("button", { name: "Approve", exact: true }).waitFor();
    expect(await review(2).textContent()).toContain("Shorter sentences, please");
    // The screenshot: round 1's decision at the top of the thread, round 2 below it.
    await page.evaluate(() => {
      const doc = (globalThis as any).document;
      const pane = doc.querySelector("[data-testid=thread]");
      const first = [...pane.querySelectorAll("[data-testid=message]")].find((m: any) => /writing_task[\s\S]*round 1/.test(m.textContent)) as any;
      pane.scrollTop += first.getBoundingClientRect().bottom - pane.getBoundingClientRect().top - 260;
    });
    await page.screenshot({ path: path.join(SHOTS, "review.png") });

    // Riya hands round 2 to Ben with the Reassign form's person picker; the thread says so.
    await review(2).getByRole("button", { name: "Reassign", exact: true }).click();
    await modal.locator("select").selectOption("U0REVIEWB");
    await modal.locator("textarea").fill("Ben knows the audience");
    await modal.getByRole("button", { name: "Reassign", exact: true }).click();
    await expect.poll(() => thread().textContent()).toContain("reassigned writing_task (round 2) to @Ben Reviewer");

    // Another reviewer approves round 2; the run finishes and the channel hears about it.
    await actAs("U0REVIEWB");
    await review(2).getByRole("button", { name: "Approve", exact: true }).click();
    await expect.poll(() => review(2).textContent()).toContain("Approved by @Ben Reviewer");
    const notice = page.getByTestId("timeline").getByTestId("message").filter({ hasText: "finished" });
    await notice.waitFor({ timeout: 30_000 });
    expect(await notice.textContent()).toContain("Started by @Sam Starter");
    await expect.poll(() => announcement.textContent()).toContain("Completed");
    // The long report: an excerpt in the message and the whole text as a file in the thread.
    await thread().getByTestId("file").first().waitFor();
    expect(await page.getByTestId("violations").textContent()).toContain("No payload broke");
    await page.locator("#close-thread").click();
    await page.evaluate(() => (globalThis as any).document.querySelector("[data-testid=timeline] [data-testid=message]").scrollIntoView({ block: "start" }));
    await page.screenshot({ path: path.join(SHOTS, "channel.png") });

    // App Home for the starter: the run is listed.
    await actAs("U0STARTER");
    await page.getByTestId("open-home").click();
    const home = page.getByTestId("home");
    await expect.poll(() => home.textContent()).toContain("Your recent runs");
    expect(await home.textContent()).toContain("newsletter");
    // App Home has no message box.
    expect(await page.locator("#composer").isVisible()).toBe(false);
    await page.screenshot({ path: path.join(SHOTS, "home.png") });
  }, 150_000);

  it("starts a crew from a message with its shortcut, and decides the review by replying in the thread", async () => {
    await page.goto(`${url}/?user=U0STARTER`);
    // A message of Sam's in the channel; "Run a crew on this message" from its ⋮ menu opens the form with its text.
    const text = "Rock pools at low tide";
    await page.getByTestId("composer").fill(text);
    await page.getByTestId("composer").press("Enter");
    const mine = page.getByTestId("timeline").getByTestId("message").filter({ hasText: text });
    await mine.hover();
    await mine.getByTestId("message-menu").click();
    await mine.getByTestId("shortcut").filter({ hasText: "Run a crew on this message" }).click();
    const modal = page.getByTestId("modal");
    const topic = modal.locator(".block.input", { hasText: "Topic" }).locator("input, textarea");
    await expect.poll(() => topic.inputValue().catch(() => "")).toBe(text);
    await modal.locator(".block.input", { hasText: "Audience" }).locator("input, textarea").fill("Kids");
    await modal.getByRole("button", { name: "Start" }).click();
    await expect.poll(() => modal.textContent()).toContain("is running");
    await modal.getByRole("button", { name: "Close" }).click();

    // The run is announced in the message's thread; its writing task waits there for a review.
    await mine.locator(".replies").click();
    await review(1).getByRole("button", { name: "Approve", exact: true }).waitFor();
    expect(await thread().getByTestId("message").filter({ hasText: "started crew" }).count()).toBe(1);

    // A reviewer's reply that decides nothing gets a private question, only visible to them; Ignore removes it.
    await actAs("U0REVIEWA");
    const reply = async (words: string) => {
      await thread().getByTestId("thread-reply").locator("input").fill(words);
      await thread().getByTestId("thread-reply").locator("input").press("Enter");
      await thread().getByTestId("message").filter({ hasText: words }).waitFor();
    };
    await reply("Is the tone right for kids?");
    const question = thread().getByTestId("ephemeral").filter({ hasText: "with your reply as feedback?" });
    await expect.poll(() => question.textContent()).toContain("Only visible to you");
    await question.getByRole("button", { name: "Ignore" }).click();
    await expect.poll(() => question.count()).toBe(0);

    // "lgtm" in the thread approves the review.
    await reply("lgtm");
    await expect.poll(() => review(1).textContent()).toContain("Approved by @Riya Reviewer");
    expect(await review(1).getByRole("button", { name: "Approve", exact: true }).count()).toBe(0);
  }, 60_000);

  it("answers the local flow's feedback request from the channel", async () => {
    await page.goto(`${url}/?user=U0REVIEWB`);
    const request = page.getByTestId("timeline").getByTestId("message").filter({ hasText: "Please check this article" });
    // The page draws the channel again on every change: a click on a button that was being replaced is
    // lost, so it is clicked again until the answer shows (a second click would only hear "already answered").
    const approve = request.getByRole("button", { name: /^approved$/i });
    await expect
      .poll(
        async () => {
          if (await approve.count()) await approve.click({ timeout: 2000 }).catch(() => {});
          return request.textContent();
        },
        { timeout: 30_000 },
      )
      .toMatch(/Ben/);
    expect(await request.getByRole("button").count()).toBe(0);
  }, 60_000);
});
