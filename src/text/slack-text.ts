// Slack hands an app a message's text in its wire format (https://api.slack.com/reference/surfaces/formatting#escaping):
// "&", "<" and ">" as entities, links and mentions as <…> tokens. A person editing that text in a form,
// and the crew reading it, should see what Slack shows instead.

const LT = 0x3c;
const GT = 0x3e;
const ENTITY = /&(amp|lt|gt);/g;
const CHARACTER: Record<string, string> = { amp: "&", lt: "<", gt: ">" };
const SPACE = /\s/;
const BROADCASTS = new Set(["here", "channel", "everyone"]);

/**
 * Slack's wire text as plain text: entities decoded, `<https://x|label>` as "label (https://x)", mentions
 * as "@name", "#channel", "@here". One pass, linear in the text's length, and never longer than the text.
 */
export function slackTextToPlain(text: string): string {
  let out = "";
  let i = 0;
  while (i < text.length) {
    const open = text.indexOf("<", i);
    if (open < 0) return out + decodeEntities(text.slice(i));
    out += decodeEntities(text.slice(i, open));
    // A token ends at the first ">"; another "<" first, or the end, leaves this one unclosed: plain text.
    // Every character is looked at once here, so a flood of "<" stays linear.
    let end = open + 1;
    while (end < text.length && text.charCodeAt(end) !== GT && text.charCodeAt(end) !== LT) end++;
    if (text.charCodeAt(end) === GT) {
      out += token(text.slice(open + 1, end)) ?? decodeEntities(text.slice(open, end + 1));
      i = end + 1;
    } else {
      out += decodeEntities(text.slice(open, end));
      i = end;
    }
  }
  return out;
}

/** `&amp;`, `&lt;`, `&gt;` back to characters, left to right in one pass (so `&amp;lt;` is "&lt;"). */
function decodeEntities(text: string): string {
  return text.includes("&") ? text.replace(ENTITY, (_, name: string) => CHARACTER[name]!) : text;
}

/** What a token between "<" and ">" reads as, or undefined for one Slack does not make (kept as it is). */
function token(inner: string): string | undefined {
  const bar = inner.indexOf("|");
  const target = bar < 0 ? inner : inner.slice(0, bar);
  // A token's target (a url, an id) has no spaces: "a < b > c", sent unescaped through the API, stays text.
  if (SPACE.test(target)) return undefined;
  const label = bar < 0 ? "" : decodeEntities(inner.slice(bar + 1));
  const id = target.slice(1);
  switch (target[0]) {
    // A mention without a name stays its id: looking names up (users.info, one call each) before
    // views.open would spend the trigger's 3 s, and the crew can still tell people apart.
    case "@":
      return label ? withAt(label) : id ? `@${id}` : undefined;
    case "#":
      return label || id ? `#${label || id}` : undefined;
    case "!": {
      const caret = id.indexOf("^");
      const command = caret < 0 ? id : id.slice(0, caret);
      if (BROADCASTS.has(command)) return `@${command}`;
      if (command === "subteam") return label ? withAt(label) : caret >= 0 ? `@${id.slice(caret + 1)}` : undefined;
      // A date, or a command newer than this code: its fallback text is what older clients show.
      return bar >= 0 ? label : undefined;
    }
  }
  if (!target) return undefined;
  const url = decodeEntities(target);
  if (!label || label === url) return url;
  // Slack labels a mailto link with the address itself: the address alone reads the same.
  if (url === `mailto:${label}`) return label;
  return `${label} (${url})`;
}

function withAt(name: string): string {
  return name.startsWith("@") ? name : `@${name}`;
}
