// The playground page: renders what the bot sent to the Slack stand-in, and sends what the visitor
// does back as Slack would (the stand-in signs it and posts it to the bot's /slack/events).
// Block Kit is rendered by the small renderer below; the `markdown` block by marked.
import { marked } from "/playground/marked.js";

const $ = (sel) => document.querySelector(sel);
const params = new URLSearchParams(location.search);
const ui = {
  user: params.get("user") || localStorage.getItem("playground.user") || "",
  channel: params.get("channel") || "",
  view: "channel", // or "home"
  thread: null, // { channel, ts }
  menu: null, // "<channel>|<ts>" of the message whose ⋮ menu is open
};
let state = null;
/** Values typed into inputs, kept across re-renders: key surface|block_id|action_id. */
const drafts = new Map();

// ------------------------------------------------------------------ text

const escapeHtml = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
const safeUrl = (u) => (/^(https?:|mailto:)/i.test(String(u)) ? String(u) : "#");
const userName = (id) => state?.names?.[id] || id;
const channelName = (id) => state?.channels.find((c) => c.id === id)?.name || id;
const groupName = (id) => state?.usergroups.find((g) => g.id === id)?.handle || id;

function slackDate(seconds, format, fallback) {
  const d = new Date(Number(seconds) * 1000);
  if (Number.isNaN(d.getTime())) return escapeHtml(fallback);
  const date = d.toLocaleDateString(undefined, { month: "short", day: "numeric", year: "numeric" });
  const time = d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  return escapeHtml(format.replace(/\{date[a-z_]*\}/g, date).replace(/\{time[a-z_]*\}/g, time));
}

/** Slack's special <…> tokens: mentions, channels, dates, links. Input is Slack-escaped text. */
function token(inner) {
  const [target, label] = inner.split("|");
  const unescape = (s) => s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  if (target.startsWith("@")) return `<span class="mention">@${escapeHtml(userName(target.slice(1)))}</span>`;
  if (target.startsWith("#")) return `<span class="mention">#${escapeHtml(label || channelName(target.slice(1)))}</span>`;
  if (target.startsWith("!subteam^")) return `<span class="mention">@${escapeHtml(label || groupName(target.slice(9)))}</span>`;
  if (target.startsWith("!date^")) {
    const [, secs, format = "{date}"] = target.split("^");
    return slackDate(secs, format, label || "");
  }
  if (target.startsWith("!")) return `<span class="mention">@${escapeHtml(target.slice(1))}</span>`;
  return `<a href="${escapeHtml(safeUrl(unescape(target)))}" target="_blank" rel="noopener">${escapeHtml(unescape(label || target))}</a>`;
}

/** mrkdwn → HTML: *bold*, _italic_, ~strike~, `code`, ```pre```, > quotes, <tokens>, line breaks. */
export function mrkdwn(text) {
  const stash = [];
  const keep = (html) => `\u0000${stash.push(html) - 1}\u0000`;
  let s = String(text ?? "");
  s = s.replace(/```([\s\S]*?)```/g, (_, code) => keep(`<pre>${code.replace(/</g, "&lt;")}</pre>`));
  s = s.replace(/`([^`\n]+)`/g, (_, code) => keep(`<code>${code.replace(/</g, "&lt;")}</code>`));
  s = s.replace(/<([^<>\n]+)>/g, (_, inner) => keep(token(inner)));
  // Slack escapes &, < and > itself; undo that, then escape for HTML.
  s = escapeHtml(s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&"));
  // Slack formats *bold* only between non-word characters (spaces, punctuation, line ends).
  const edge = "(^|[^\\w*_~])";
  const end = "(?![\\w])";
  s = s.replace(new RegExp(`${edge}\\*([^*\\n]+?)\\*${end}`, "g"), "$1<b>$2</b>");
  s = s.replace(new RegExp(`${edge}_([^_\\n]+?)_${end}`, "g"), "$1<i>$2</i>");
  s = s.replace(new RegExp(`${edge}~([^~\\n]+?)~${end}`, "g"), "$1<s>$2</s>");
  s = s
    .split("\n")
    .map((line) => (line.startsWith("&gt; ") || line === "&gt;" ? `<blockquote>${line.slice(5)}</blockquote>` : `${line}<br>`))
    .join("")
    .replace(/<br>$/, "");
  return s.replace(/\u0000(\d+)\u0000/g, (_, i) => stash[Number(i)]);
}

marked.use({
  gfm: true,
  breaks: false,
  renderer: {
    html: (t) => escapeHtml(typeof t === "string" ? t : t.text),
  },
});

/** Standard Markdown (the `markdown` block) through marked; raw HTML is shown as text, links limited to http(s). */
function markdown(text) {
  const html = marked.parse(String(text ?? ""), { async: false });
  const tpl = document.createElement("template");
  tpl.innerHTML = html;
  for (const a of tpl.content.querySelectorAll("a")) {
    a.setAttribute("href", safeUrl(a.getAttribute("href")));
    a.setAttribute("target", "_blank");
    a.setAttribute("rel", "noopener");
  }
  for (const img of tpl.content.querySelectorAll("img")) if (!/^https?:/i.test(img.getAttribute("src") || "")) img.remove();
  return tpl.innerHTML;
}

const textObject = (t) => (!t ? "" : t.type === "mrkdwn" ? mrkdwn(t.text) : escapeHtml(t.text).replace(/\n/g, "<br>"));

function richText(elements) {
  const inline = (els) =>
    (els || [])
      .map((e) => {
        let h;
        if (e.type === "text") h = escapeHtml(e.text).replace(/\n/g, "<br>");
        else if (e.type === "link") h = `<a href="${escapeHtml(safeUrl(e.url))}" target="_blank" rel="noopener">${escapeHtml(e.text || e.url)}</a>`;
        else if (e.type === "user") h = `<span class="mention">@${escapeHtml(userName(e.user_id))}</span>`;
        else if (e.type === "usergroup") h = `<span class="mention">@${escapeHtml(groupName(e.usergroup_id))}</span>`;
        else if (e.type === "channel") h = `<span class="mention">#${escapeHtml(channelName(e.channel_id))}</span>`;
        else if (e.type === "broadcast") h = `<span class="mention">@${escapeHtml(e.range)}</span>`;
        else if (e.type === "emoji") h = e.unicode ? String.fromCodePoint(...e.unicode.split("-").map((x) => parseInt(x, 16))) : `:${escapeHtml(e.name)}:`;
        else if (e.type === "date") h = slackDate(e.timestamp, e.format || "{date}", e.fallback || "");
        else h = escapeHtml(e.text || "");
        const st = e.style || {};
        if (st.code) h = `<code>${h}</code>`;
        if (st.bold) h = `<b>${h}</b>`;
        if (st.italic) h = `<i>${h}</i>`;
        if (st.strike) h = `<s>${h}</s>`;
        return h;
      })
      .join("");
  return (elements || [])
    .map((el) => {
      if (el.type === "rich_text_section") return `<div>${inline(el.elements)}</div>`;
      if (el.type === "rich_text_preformatted") return `<pre>${inline(el.elements)}</pre>`;
      if (el.type === "rich_text_quote") return `<blockquote>${inline(el.elements)}</blockquote>`;
      if (el.type === "rich_text_list") {
        const tag = el.style === "ordered" ? "ol" : "ul";
        return `<${tag} style="margin-left:${(el.indent || 0) * 16}px">${(el.elements || []).map((item) => `<li>${inline(item.elements)}</li>`).join("")}</${tag}>`;
      }
      return "";
    })
    .join("");
}

// ------------------------------------------------------------------ Block Kit

/** ctx: { surface: "msg:<channel>:<ts>" | "view:<id>" | "home", channel, ts, threadTs, viewId, errors } */
function element(el, ctx, blockId, inInput, dispatch) {
  if (!el) return "";
  const key = `${ctx.surface}|${blockId}|${el.action_id}`;
  const data = `data-key="${escapeHtml(key)}" data-block="${escapeHtml(blockId)}" data-action="${escapeHtml(el.action_id || "")}" data-type="${escapeHtml(el.type)}"`;
  switch (el.type) {
    case "button": {
      const style = el.style === "primary" ? "primary" : el.style === "danger" ? "danger" : "";
      const url = el.url ? ` data-url="${escapeHtml(safeUrl(el.url))}"` : "";
      // A confirm dialog (Stop): asked like Slack asks, before the click is sent.
      const confirm = el.confirm ? ` data-confirm="${escapeHtml([el.confirm.title?.text, el.confirm.text?.text].filter(Boolean).join("\n\n"))}"` : "";
      return `<button type="button" class="btn ${style}" ${data} data-value="${escapeHtml(el.value ?? "")}"${url}${confirm}>${escapeHtml(el.text?.text)}</button>`;
    }
    case "image":
      return `<img class="image" src="${escapeHtml(safeUrl(el.image_url))}" alt="${escapeHtml(el.alt_text)}" style="width:72px;height:72px;object-fit:cover">`;
    case "plain_text_input": {
      const value = drafts.has(key) ? drafts.get(key) : el.initial_value || "";
      const ph = escapeHtml(el.placeholder?.text || "");
      const max = el.max_length ? ` maxlength="${Number(el.max_length)}"` : "";
      return el.multiline
        ? `<textarea ${data} placeholder="${ph}"${max}>${escapeHtml(value)}</textarea>`
        : `<input ${data} placeholder="${ph}"${max} value="${escapeHtml(value)}">`;
    }
    case "static_select":
    case "external_select":
    case "users_select":
    case "conversations_select":
    case "channels_select": {
      let options = el.options || (el.option_groups || []).flatMap((g) => g.options);
      if (el.type === "users_select") options = (state?.users || []).map((u) => ({ value: u.id, text: { type: "plain_text", text: u.name } }));
      if (el.type === "conversations_select" || el.type === "channels_select")
        options = (state?.channels || []).map((c) => ({ value: c.id, text: { type: "plain_text", text: `#${c.name}` } }));
      const chosen = drafts.has(key) ? drafts.get(key) : (el.initial_option?.value ?? "");
      const opts = options.map((o) => `<option value="${escapeHtml(o.value)}"${o.value === chosen ? " selected" : ""}>${escapeHtml(o.text?.text)}</option>`).join("");
      const fires = !inInput || dispatch ? ' data-fires="1"' : "";
      return `<select ${data}${fires}><option value="">${escapeHtml(el.placeholder?.text || "Select…")}</option>${opts}</select>`;
    }
    case "overflow":
      return `<select ${data} data-fires="1"><option value="">⋯</option>${(el.options || []).map((o) => `<option value="${escapeHtml(o.value)}">${escapeHtml(o.text?.text)}</option>`).join("")}</select>`;
    case "checkboxes":
    case "radio_buttons":
      return (el.options || [])
        .map(
          (o) =>
            `<label style="display:block"><input type="${el.type === "checkboxes" ? "checkbox" : "radio"}" name="${escapeHtml(key)}" ${data} value="${escapeHtml(o.value)}"> ${textObject(o.text)}</label>`,
        )
        .join("");
    default:
      return `<span class="muted">[${escapeHtml(el.type)}]</span>`;
  }
}

function block(b, ctx) {
  const id = b.block_id || "";
  switch (b.type) {
    case "section": {
      const fields = b.fields?.length ? `<div class="fields">${b.fields.map((f) => `<div>${textObject(f)}</div>`).join("")}</div>` : "";
      const accessory = b.accessory ? `<div>${element(b.accessory, ctx, id, false)}</div>` : "";
      return `<div class="block section"><div class="text">${textObject(b.text)}${fields}</div>${accessory}</div>`;
    }
    case "markdown":
      return `<div class="block markdown">${markdown(b.text)}</div>`;
    case "header":
      return `<div class="block header">${escapeHtml(b.text?.text)}</div>`;
    case "context":
      return `<div class="block context">${(b.elements || []).map((e) => (e.type === "image" ? `<img src="${escapeHtml(safeUrl(e.image_url))}" alt="${escapeHtml(e.alt_text)}">` : `<span>${textObject(e)}</span>`)).join("")}</div>`;
    case "divider":
      return `<hr class="divider">`;
    case "actions":
      return `<div class="block actions">${(b.elements || []).map((e) => element(e, ctx, id, false)).join("")}</div>`;
    case "input": {
      const error = ctx.errors?.[id] ? `<div class="error">${escapeHtml(ctx.errors[id])}</div>` : "";
      const hint = b.hint ? `<div class="hint">${textObject(b.hint)}</div>` : "";
      return `<div class="block input"><label>${escapeHtml(b.label?.text)}${b.optional ? ' <span class="optional">(optional)</span>' : ""}</label>${element(b.element, ctx, id, true, b.dispatch_action)}${hint}${error}</div>`;
    }
    case "image":
      return `<div class="block">${b.title ? `<div>${escapeHtml(b.title.text)}</div>` : ""}<img class="image" src="${escapeHtml(safeUrl(b.image_url))}" alt="${escapeHtml(b.alt_text)}"></div>`;
    case "rich_text":
      return `<div class="block rich">${richText(b.elements)}</div>`;
    default:
      return `<div class="block muted">[unsupported block ${escapeHtml(b.type)}]</div>`;
  }
}

const blocks = (list, ctx) => (list || []).map((b) => block(b, ctx)).join("");

// ------------------------------------------------------------------ timeline

function messageHtml(m, { inThread = false } = {}) {
  const ctx = { surface: `msg:${m.channel}:${m.ts}`, channel: m.channel, ts: m.ts, threadTs: m.thread_ts };
  const isBot = m.user === "U0BOT" || !state.names[m.user];
  const who = isBot ? "Crewline" : userName(m.user);
  const when = new Date(m.at ?? Date.now()).toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
  const content = m.stream ? planHtml(m.stream) : m.blocks?.length ? blocks(m.blocks, ctx) : `<div class="block">${mrkdwn(m.text)}</div>`;
  const replies = !inThread ? replyCount(m) : 0;
  const more = replies ? `<div class="replies" data-thread="${escapeHtml(m.channel)}|${escapeHtml(m.ts)}">${replies} ${replies === 1 ? "reply" : "replies"}</div>` : "";
  return `<div class="msg" data-ts="${escapeHtml(m.ts)}" data-testid="message" data-surface="${escapeHtml(ctx.surface)}" data-channel="${escapeHtml(m.channel)}" data-thread-ts="${escapeHtml(m.thread_ts || "")}">${messageMenu(m)}
    <div class="avatar">${isBot ? "🤖" : escapeHtml(who[0])}</div>
    <div class="body"><div class="meta"><b>${escapeHtml(who)}</b>${isBot ? '<span class="app-tag">APP</span>' : ""}${when}${m.updated ? ' <span class="edited">(edited)</span>' : ""}</div>${content}${more}</div></div>`;
}

/** A streamed message (chat.startStream): its plan title and one card per task, as Slack shows a plan. */
const TASK_ICONS = { pending: "○", in_progress: "◔", complete: "✓", error: "✕" };
function planHtml(stream) {
  const cards = (stream.tasks || [])
    .map(
      (t) => `<li class="task ${escapeHtml(t.status)}" data-testid="task-card" data-status="${escapeHtml(t.status)}">
        <span class="task-icon">${TASK_ICONS[t.status] || "○"}</span>
        <div class="task-body"><div class="task-title">${mrkdwn(t.title)}</div>${t.details ? `<div class="task-details">${mrkdwn(t.details)}</div>` : ""}${
          t.output ? `<div class="task-output">${mrkdwn(t.output)}</div>` : ""
        }</div></li>`,
    )
    .join("");
  const live = stream.state === "streaming" ? '<span class="plan-live">live</span>' : "";
  return `<div class="block plan" data-testid="plan" data-state="${escapeHtml(stream.state)}"><div class="plan-title">${mrkdwn(stream.title || "Plan")}${live}</div><ol class="tasks">${cards}</ol>${
    stream.text ? `<div class="block">${mrkdwn(stream.text)}</div>` : ""
  }</div>`;
}

function ephemeralHtml(e) {
  const ctx = { surface: `eph:${e.ts}`, channel: e.channel, ts: e.ts };
  const content = e.blocks?.length ? blocks(e.blocks, ctx) : `<div class="block">${mrkdwn(e.text)}</div>`;
  const where = `data-ephemeral="1" data-channel="${escapeHtml(e.channel)}" data-ts="${escapeHtml(e.ts)}" data-thread-ts="${escapeHtml(e.thread_ts || "")}"`;
  return `<div class="msg ephemeral" data-testid="ephemeral" ${where}><div class="avatar">🤖</div><div class="body"><div class="meta"><b>Crewline</b><span class="app-tag">APP</span><span class="note">Only visible to you</span>${e.updated ? ' <span class="edited">(edited)</span>' : ""}</div>${content}</div></div>`;
}

function fileHtml(f) {
  return `<div class="msg" data-testid="file"><div class="avatar">🤖</div><div class="body"><div class="meta"><b>Crewline</b><span class="app-tag">APP</span>shared a file</div>
    <div class="file"><div class="name">📄 ${escapeHtml(f.title || f.filename)}</div><div class="meta">${escapeHtml(f.filename)} · ${(f.size / 1024).toFixed(1)} KB · <a href="/playground/files/${escapeHtml(f.id)}" target="_blank">open</a></div><pre>${escapeHtml(f.preview)}</pre></div></div></div>`;
}

const replyCount = (m) =>
  state.messages.filter((x) => x.channel === m.channel && x.thread_ts === m.ts && x.ts !== m.ts).length +
  state.files.filter((f) => f.channel === m.channel && f.thread_ts === m.ts).length;

/** Messages, files and the user's ephemerals of one channel (top level) or one thread, in time order. */
function timeline(channel, threadTs) {
  const items = [];
  for (const m of state.messages) {
    if (m.channel !== channel) continue;
    const top = !m.thread_ts || m.thread_ts === m.ts;
    if (threadTs ? m.ts === threadTs || m.thread_ts === threadTs : top) items.push({ at: m.at ?? 0, ts: m.ts, html: messageHtml(m, { inThread: !!threadTs }) });
  }
  for (const f of state.files) if (f.channel === channel && (threadTs ? f.thread_ts === threadTs : !f.thread_ts)) items.push({ at: f.at ?? 0, ts: f.ts || "0", html: fileHtml(f) });
  for (const e of state.ephemerals)
    if (e.channel === channel && (threadTs ? e.thread_ts === threadTs : !e.thread_ts)) items.push({ at: e.at ?? 0, ts: e.ts, html: ephemeralHtml(e) });
  return items
    .sort((a, b) => a.at - b.at || Number(a.ts) - Number(b.ts))
    .map((i) => i.html)
    .join("");
}

// ------------------------------------------------------------------ render

function render() {
  if (!state) return;
  const focused = document.activeElement?.dataset?.key;
  const selection = focused ? [document.activeElement.selectionStart, document.activeElement.selectionEnd] : null;

  const userSelect = $("#user");
  if (!userSelect.options.length) {
    userSelect.innerHTML = state.users.map((u) => `<option value="${escapeHtml(u.id)}">${escapeHtml(u.name)} — ${escapeHtml(u.role)}</option>`).join("");
  }
  userSelect.value = ui.user;
  $("#channels").innerHTML = state.channels
    .map((c) => `<li><a href="#" data-channel="${escapeHtml(c.id)}" class="${ui.view === "channel" && ui.channel === c.id ? "active" : ""}"># ${escapeHtml(c.name)}</a></li>`)
    .join("");
  $("#open-home").classList.toggle("active", ui.view === "home");
  $("#notes").innerHTML = state.notes.map((n) => `<p>${mrkdwn(n)}</p>`).join("");
  $("#violations").innerHTML = state.violations.length
    ? state.violations
        .slice(-8)
        .map((v) => `<p class="bad">⚠️ ${escapeHtml(v.method)}: ${escapeHtml(v.problems.join("; "))}</p>`)
        .join("")
    : "<p>No payload broke Slack's documented limits.</p>";

  const timelineEl = $("#timeline");
  const atBottom = timelineEl.scrollHeight - timelineEl.scrollTop - timelineEl.clientHeight < 40;
  if (ui.view === "home") {
    $("#title").textContent = "🤖 Crewline · Home";
    timelineEl.innerHTML = `<div class="home" data-testid="home">${state.home ? blocks(state.home.blocks, { surface: `view:${state.home.id}`, viewId: state.home.id }) : "<p>Opening the Home tab…</p>"}</div>`;
    $("#composer").hidden = true;
  } else {
    $("#title").textContent = `# ${channelName(ui.channel)}`;
    timelineEl.innerHTML = timeline(ui.channel) || '<p style="padding:0 20px" class="meta">Nothing here yet. Type <code>/crew</code> below to start a crew.</p>';
    $("#composer").hidden = false;
    if (atBottom) timelineEl.scrollTop = timelineEl.scrollHeight;
  }

  const thread = $("#thread");
  if (ui.thread && ui.view === "channel") {
    thread.hidden = false;
    const top = thread.scrollTop;
    const atEnd = thread.scrollHeight - top - thread.clientHeight < 40;
    thread.innerHTML = `<div class="thread-head"><span>Thread · #${escapeHtml(channelName(ui.thread.channel))}</span><a href="#" id="close-thread">✕</a></div>${timeline(ui.thread.channel, ui.thread.ts)}${threadReplyBox(ui.thread)}`;
    // Kept where it was, or at the end when it was there (a new reply, or the private question, shows).
    thread.scrollTop = atEnd ? thread.scrollHeight : top;
  } else {
    thread.hidden = true;
  }

  const overlay = $("#overlay");
  const modal = state.modal;
  if (modal) {
    const ctx = { surface: `view:${modal.id}`, viewId: modal.id, errors: modal.errors };
    overlay.hidden = false;
    overlay.innerHTML = `<div class="modal" data-testid="modal" data-view="${escapeHtml(modal.id)}">
      <div class="modal-head"><span>${escapeHtml(modal.title?.text)}</span><a href="#" data-close="${escapeHtml(modal.id)}">✕</a></div>
      <div class="modal-body">${blocks(modal.blocks, ctx)}</div>
      <div class="modal-foot"><button type="button" class="btn" data-close="${escapeHtml(modal.id)}">${escapeHtml(modal.close?.text || "Close")}</button>${modal.submit ? `<button type="button" class="btn primary" data-submit="${escapeHtml(modal.id)}">${escapeHtml(modal.submit.text)}</button>` : ""}</div></div>`;
  } else {
    overlay.hidden = true;
    overlay.innerHTML = "";
  }

  if (focused) {
    const el = document.querySelector(`[data-key="${CSS.escape(focused)}"]`);
    if (el) {
      el.focus();
      if (selection && typeof el.setSelectionRange === "function" && selection[0] !== null) el.setSelectionRange(selection[0], selection[1]);
    }
  }
}

// ------------------------------------------------------------------ replies and message shortcuts

/** A message's ⋮ menu (More actions): reply in its thread, and the message shortcuts the app declares. */
function messageMenu(m) {
  const id = `${m.channel}|${m.ts}`;
  const open = ui.menu === id;
  const threadTs = m.thread_ts && m.thread_ts !== m.ts ? m.thread_ts : m.ts;
  const items = [
    `<button type="button" class="menu-item" data-thread="${escapeHtml(m.channel)}|${escapeHtml(threadTs)}">💬 Reply in thread</button>`,
    ...(state.shortcuts || []).map(
      (s) => `<button type="button" class="menu-item" data-shortcut="${escapeHtml(s.callback_id)}" data-testid="shortcut">⚡ ${escapeHtml(s.name)}</button>`,
    ),
  ].join("");
  return `<div class="msg-actions${open ? " open" : ""}"><button type="button" class="msg-more" data-menu="${escapeHtml(id)}" title="More actions" aria-label="More actions" data-testid="message-menu">⋮</button>${open ? `<div class="menu" role="menu">${items}</div>` : ""}</div>`;
}

/** The reply box under a thread: what is typed reaches the bot as a message event in that thread. */
function threadReplyBox(t) {
  const key = `reply|${t.channel}|${t.ts}`;
  return `<form class="thread-reply" data-testid="thread-reply" data-channel="${escapeHtml(t.channel)}" data-thread-ts="${escapeHtml(t.ts)}">
    <input data-key="${escapeHtml(key)}" autocomplete="off" placeholder="Reply… (lgtm, approve, 👍, changes: …)" value="${escapeHtml(drafts.get(key) ?? "")}">
    <button type="submit">Reply</button></form>`;
}

document.addEventListener("submit", async (ev) => {
  const form = ev.target.closest?.(".thread-reply");
  if (!form) return;
  ev.preventDefault();
  const input = form.querySelector("input");
  const text = input.value.trim();
  if (!text) return;
  drafts.delete(input.dataset.key);
  input.value = "";
  const answer = await post("/playground/message", { channel: form.dataset.channel, threadTs: form.dataset.threadTs, text });
  if (answer.ok) requestAnimationFrame(() => ($("#thread").scrollTop = $("#thread").scrollHeight));
});

document.addEventListener("click", (ev) => {
  const el = ev.target.closest("button");
  if (el?.dataset.menu) {
    ui.menu = ui.menu === el.dataset.menu ? null : el.dataset.menu;
    return render();
  }
  if (el?.dataset.shortcut) {
    const msg = el.closest(".msg");
    void post("/playground/shortcut", { channel: msg.dataset.channel, ts: msg.dataset.ts, callbackId: el.dataset.shortcut });
  }
  // Any other click (a menu item included) closes the menu.
  if (ui.menu) {
    ui.menu = null;
    render();
  }
});

// ------------------------------------------------------------------ talking to the stand-in

async function load() {
  const res = await fetch(`/playground/state?user=${encodeURIComponent(ui.user)}`);
  state = await res.json();
  if (!ui.user) ui.user = state.users[0]?.id;
  if (!ui.channel) ui.channel = state.channels[0]?.id;
  render();
}

let loading = null;
let again = false;
function refresh() {
  if (loading) {
    again = true;
    return;
  }
  loading = load()
    .catch(() => {})
    .finally(() => {
      loading = null;
      if (again) {
        again = false;
        refresh();
      }
    });
}

function toast(text) {
  const el = $("#toast");
  el.textContent = text;
  el.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => (el.hidden = true), 4000);
}

async function post(path, body) {
  const res = await fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ user: ui.user, ...body }) });
  const answer = await res.json().catch(() => ({}));
  if (!answer.ok) toast(answer.error || `The bot answered ${answer.status ?? res.status}.`);
  refresh();
  return answer;
}

/** state.values of a surface (message or modal), as Slack collects them from its input elements. */
function collectState(root) {
  const values = {};
  for (const el of root.querySelectorAll("[data-key][data-block]")) {
    const type = el.dataset.type;
    if (type === "button") continue;
    const block = (values[el.dataset.block] ??= {});
    if (type === "plain_text_input") block[el.dataset.action] = { type, value: el.value === "" ? null : el.value };
    // A person picker (users_select) is read by the user it names, as Slack sends it.
    else if (el.tagName === "SELECT" && type === "users_select") block[el.dataset.action] = { type, selected_user: el.value || null };
    else if (el.tagName === "SELECT") {
      const opt = el.selectedOptions[0];
      block[el.dataset.action] = { type, selected_option: el.value ? { text: { type: "plain_text", text: opt.textContent }, value: el.value } : null };
    }
  }
  return values;
}

function surfaceOf(el) {
  return el.closest(".modal") || el.closest(".msg") || el.closest(".home");
}

async function fire(el) {
  const root = surfaceOf(el);
  const action = { action_id: el.dataset.action, block_id: el.dataset.block, type: el.dataset.type };
  if (el.dataset.type === "button") {
    if (el.dataset.url) window.open(el.dataset.url, "_blank", "noopener");
    if (el.dataset.value) action.value = el.dataset.value;
  } else if (el.tagName === "SELECT") {
    if (!el.value) return;
    if (el.dataset.type === "users_select") action.selected_user = el.value;
    else action.selected_option = { text: { type: "plain_text", text: el.selectedOptions[0].textContent }, value: el.value };
  }
  const body = { action, state: collectState(root) };
  if (root.classList.contains("modal")) body.viewId = root.dataset.view;
  else if (root.classList.contains("home")) body.viewId = state.home?.id;
  else
    Object.assign(body, {
      channel: root.dataset.channel,
      ts: root.dataset.ts,
      threadTs: root.dataset.threadTs || undefined,
      ephemeral: root.dataset.ephemeral === "1" || undefined,
    });
  await post("/playground/action", body);
}

document.addEventListener("input", (ev) => {
  const el = ev.target;
  if (el.dataset?.key) drafts.set(el.dataset.key, el.value);
});

document.addEventListener("change", (ev) => {
  const el = ev.target;
  if (el.dataset?.key) drafts.set(el.dataset.key, el.value);
  if (el.tagName === "SELECT" && el.dataset.fires) void fire(el);
});

document.addEventListener("click", async (ev) => {
  const el = ev.target.closest("button, a, .replies");
  if (!el) return;
  if (el.dataset.channel && el.closest("#channels")) {
    ev.preventDefault();
    ui.view = "channel";
    ui.channel = el.dataset.channel;
    ui.thread = null;
    return render();
  }
  if (el.id === "open-home") {
    ev.preventDefault();
    ui.view = "home";
    render();
    return void post("/playground/home", {});
  }
  if (el.id === "close-thread") {
    ev.preventDefault();
    ui.thread = null;
    return render();
  }
  if (el.dataset.thread) {
    const [channel, ts] = el.dataset.thread.split("|");
    ui.thread = { channel, ts };
    return render();
  }
  if (el.dataset.close) {
    ev.preventDefault();
    return void post("/playground/close", { viewId: el.dataset.close });
  }
  if (el.dataset.submit) {
    const modal = el.closest(".modal");
    return void post("/playground/submit", { viewId: el.dataset.submit, state: collectState(modal) });
  }
  if (el.dataset.type === "button") {
    ev.preventDefault();
    if (el.dataset.confirm && !window.confirm(el.dataset.confirm)) return;
    return void fire(el);
  }
  if (el.tagName === "A" && el.getAttribute("href")?.includes("/archives/")) {
    // Permalinks (https://…/archives/C…/p…?thread_ts=…): open the thread here.
    ev.preventDefault();
    const m = /archives\/([A-Z0-9]+)\/p(\d{10})(\d+)(?:\?thread_ts=([\d.]+))?/.exec(el.getAttribute("href"));
    if (m) {
      ui.view = "channel";
      ui.channel = m[1];
      ui.thread = { channel: m[1], ts: m[4] || `${m[2]}.${m[3]}` };
      render();
    }
  }
});

$("#user").addEventListener("change", (ev) => {
  ui.user = ev.target.value;
  localStorage.setItem("playground.user", ui.user);
  refresh();
  if (ui.view === "home") void post("/playground/home", {});
});

$("#composer").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = $("#composer-input");
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  // A slash command goes to the bot as one; anything else is your message in the channel.
  if (text.startsWith("/")) await post("/playground/command", { channel: ui.channel, text });
  else await post("/playground/message", { channel: ui.channel, text });
});

new EventSource("/playground/events").onmessage = () => refresh();
refresh();
