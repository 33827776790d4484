// Small text helpers for untrusted input: fences that content cannot close, markdown specs, secrets cut from what a
// run logs, what an error names and what an artifact is called.

// A password holding spaces or tabs, taken to its `@` when one follows on the line: `user:` and what is no port (digits
// then a space or anything but a word character or `@`: `redis://cache:6379 up`, `http://localhost:3000, log in`,
// `https://h: refused`), then at most 64 characters with no line break, slash, quote, angle bracket, backslash or `@`
// (a JSON string, a path, a sentence's next URL end it), then `@` and a host. A user name holds no `[` (an IPv6 host).
// A quote never: it may end a JSON string, and the cut would eat the next field. Bounded: each URL reads 64 more.
const SPACED_USER_INFO =
  String.raw`(?:[^ \t\n\r\f\v"'<>\\/@:[]+:(?!\d*[ \t]|\d+[^\w@])[^\n\r\f\v"'<>\\/@]{0,64}@(?=[\w[]))?`;
// A URL in free text: from its `://` (the scheme stays as text, whatever precedes it: `retry -https://`,
// `404.https://`, and a scan starts only there, so it stays linear), up to a space, a quote or an angle bracket (a
// JSON line without spaces, `{"homepage":"https://example.com","author":"dev@example.org"}`, keeps its fields).
// Whitespace is ASCII only, spelled out: a .log is scrubbed as latin1, where `\s` would take 0xA0, a byte inside a
// UTF-8 character.
const URL_IN_TEXT = new RegExp(String.raw`(:\/\/)(${SPACED_USER_INFO}[^ \t\n\r\f\v"'<>]*)`, 'g');
// Where what follows a URL is cut anyway (`bare`, `host`): from any `://`, JSON-escaped (`:\/\/`) or percent-encoded
// once or more (`%3A%2F%2F`, `https:%2F%2F`, `%253A%252F%252F`), up to a space alone (a quote in it is its own).
const URL_TO_SPACE =
  new RegExp(String.raw`((?::|%(?:25)*3a)(?:\\?\/|%(?:25)*2f){2})(${SPACED_USER_INFO}[^ \t\n\r\f\v]*)`, 'gi');
// The end of a user info's last `@`, as written or percent-encoded (`%40`, `%2540`): a host holds no `%`, so an
// encoded `@` before the path still ends a user info (`https://u%3Atok%40h/`).
const USER_INFO = /^[^]*(?:@|%(?:25)*40)/i;
// A URL svc names alone (a git remote): it ends where its line ends, so a password holding a space, a quote or a
// backslash is cut whole.
const URL_ALONE = /^([a-z][a-z0-9+.-]*:\/\/)([^\n\r]*)$/i;
// A query or fragment parameter (`?private_token=`, `&X-Amz-Signature=`, `#access_token=`), its value up to the next
// one or a backslash (JSON's `\n`). No part may cross a separator, so each character is read at most twice.
const PARAM = /([?&#;])([^?&#;=\\]*)=([^?&#;\\]*)/g;
const SECRET_PARAM = /token|secret|pass|pwd|key|sig|cred|auth/i;

/** What a URL keeps: `marked` (a run's log, an error) all but its user info (`***@`) and a secret-named parameter's
 * value (`***`); `bare` (a git config inside the sandbox) what git needs to find a repository, no user info, query,
 * fragment or `;`/`&` parameter; `host` (a reply's error) its scheme and host alone: a chat reply URL's path is its
 * credential. A URL percent-encoded whole (its `://` is) keeps its host alone in `bare` too: git cannot use it. */
type UrlKept = 'marked' | 'bare' | 'host';

/** One URL cut. A password may hold `@` itself, so the user info goes up to the last `@` before the path; in free text
 * never across a backslash (JSON's `\n` between two config lines, `http://proxy:3128\nuser.email=dev@example.org`). */
function cutUrl(keep: UrlKept, freeText: boolean) {
  return (url: string, scheme: string, rest: string): string => {
    // Most URLs in a log have no user info, query or fragment: `marked` keeps those as they are.
    if (keep === 'marked' && !/[@?#;&]/.test(rest)) return url;
    // An encoded URL's path starts at its first slash encoded as its `://` is (a password's `%2F` is encoded once more,
    // `%252F`) or written as is.
    const encoded = scheme.includes('%');
    const depth = /%((?:25)*)2f/i.exec(scheme)?.[1];
    const slash = encoded ? new RegExp(String.raw`[/\\]|%${depth ?? '(?:25)*'}2f`, 'i') : freeText ? /[/\\]/ : /\//;
    const path = rest.search(slash);
    const info = path < 0 ? rest : rest.slice(0, path);
    const at = keep === 'marked' ? info.lastIndexOf('@') + 1 : (USER_INFO.exec(info)?.[0].length ?? 0);
    const after = rest.slice(at);
    if (keep === 'marked') {
      const kept = !/[?#;&]/.test(after) ? after : after.replace(PARAM, (param, sep: string, name: string) =>
        SECRET_PARAM.test(name) ? `${sep}${name}=***` : param);
      return `${scheme}${at === 0 ? '' : '***@'}${kept}`;
    }
    // A host holds no `%`: an encoded path (`hooks.example%2Fservices%2F…`) is cut too. A path's `;` or `&` that
    // starts no parameter (`a&b.git`) is git's.
    const hostOnly = keep === 'host' || encoded;
    const end = after.search(hostOnly ? /[/?#\\%]/ : /[?#]|[;&][^;&=/?#]*=/);
    return end < 0 ? scheme + after : `${scheme}${after.slice(0, end)}${hostOnly ? '/…' : ''}`;
  };
}

// A gate job credential as src/gate/job-credential.ts mints it, `g1.<payload>.<MAC of 32 bytes>` in base64url (the
// worker loads no gate module unless its run is sandboxed, so the shape is written here).
const JOB_CREDENTIAL = /\bg1\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])/g;

// An HTTP credential header's value, after its scheme if it has one: `curl -v` through the pod's proxy prints
// `> Proxy-Authorization: Basic <base64 of svc:credential>`, which no other pattern here would see. A quote may be
// escaped (`curl -H \"Authorization: …\"` inside a stream-json line): the value stops before its backslash, so the
// line still parses and its usage is still read.
const AUTHORIZATION =
  /\b((?:proxy-)?authorization(?:\\?["'])?[ \t]*:[ \t]*(?:\\?["'])?(?:[a-z][\w.+-]*[ \t]+)?)[^ \t\n\r\f\v"'<>\\]+/gi;

/** What a run's log and errors keep of `text`: no URL's password or secret-named parameter, no gate job credential,
 * no Authorization header's credential (a CLI printing its proxy or base URL, git naming a remote with its token,
 * curl -v). Every cut of a secret from text is this one. */
export function redactSecrets(text: string, keep: UrlKept = 'marked'): string {
  // Exact looks first: a URL pattern tries every position and calls back for each URL, and `marked` cuts nothing of a
  // URL with no user info, query or fragment (most text names no URL, a registry's log names thousands of plain ones).
  const urls = keep !== 'marked' || (text.includes('://') && /[@?#;&]/.test(text));
  const cut = !urls ? text : text.replace(keep === 'marked' ? URL_IN_TEXT : URL_TO_SPACE, cutUrl(keep, true));
  return (cut.includes('g1.') ? cut.replace(JOB_CREDENTIAL, 'g1.***') : cut).replace(AUTHORIZATION, '$1***');
}

/** A URL svc names alone (a remote in an error), redacted: its user info cut up to the last `@` before its path
 * whatever lies between; in free text a space ends a URL (`https://h:8080 refused; mail ops@example.org` names no user
 * info). */
export function urlWithoutSecrets(url: string): string {
  const alone = URL_ALONE.exec(url);
  return redactSecrets(alone ? cutUrl('marked', false)(alone[0], alone[1]!, alone[2]!) : url);
}

const hideSecrets = (_key: string, value: unknown): unknown =>
  typeof value === 'string' ? redactSecrets(value) : value;
// What each pattern above needs, as JSON.stringify writes it (it escapes none of these characters).
const MAYBE_SECRET = /:\/\/|g1\.|authorization/i;

/** JSON.stringify(value) with each string in it redacted: a secret is cut as the text it is, whatever JSON
 * escapes it is written with (a tab as `\t`), and the line stays JSON. Most lines name no URL, credential or header:
 * a replacer call per value costs an ingested event 3-4 times its serialising, a look at the text far less. */
export function jsonWithoutSecrets(value: unknown): string {
  const text = JSON.stringify(value);
  return MAYBE_SECRET.test(text) ? JSON.stringify(value, hideSecrets) : text;
}

/** A `.log` artifact's bytes, redacted as latin1 text, each byte one character, so whatever is not a secret stays
 * byte for byte. */
export function logWithoutSecrets(content: string | Buffer): Buffer {
  return Buffer.from(redactSecrets(Buffer.from(content).toString('latin1')), 'latin1');
}

// None of the patterns above spans one of these, but AUTHORIZATION's name and scheme, which a header may end with.
const SPANNED_BY_NONE = /[ \t\n\r\f\v"'<>\\]/;
// A trailing backslash is held back with the header: cut after `Authorization\`, the next piece would start
// `": \"Bearer` with no name, and its token would pass.
const OPEN_HEADER = /(?:proxy-)?authorization(?:\\?["'])?[ \t]*(?::[ \t]*(?:\\?["'])?(?:[a-z][\w.+-]*[ \t]+)?)?\\?$/i;

/**
 * Where a piece of an over-long line may end (a line is scrubbed piece by piece) so that no secret is cut in two: just
 * after its last character no pattern spans, or before a header name it ends with, however far back (spaces or a long
 * scheme between). One exception, so it stays linear on hostile text: a piece with no such character is cut at its end
 * (whatever secret it holds is cut in two). OPEN_HEADER is tried only where a header name starts, and a try reads no
 * further than its own spaces and scheme word; a header at the piece's start is not held back, so the next piece
 * always moves on.
 */
export function pieceEnd(text: string): number {
  let end = text.length;
  while (end > 0 && !SPANNED_BY_NONE.test(text[end - 1]!)) end--;
  if (end === 0) return text.length;
  const open = OPEN_HEADER.exec(text.slice(0, end));
  return open && open.index > 0 ? open.index : end;
}

/** A backtick fence longer than any backtick run inside the content, so the data cannot end the block early. */
export function fence(content: string, info = ''): string {
  const longest = Math.max(0, ...Array.from(content.matchAll(/`+/g), (m) => m[0].length));
  const ticks = '`'.repeat(Math.max(3, longest + 1));
  return `${ticks}${info}\n${content.replace(/\n?$/, '\n')}${ticks}`;
}

/** A task spec in markdown: `# title`, its lead lines, then each `## heading` with its lines; one ending line break. */
export function markdownSpec(title: string, lead: string[], sections: Record<string, string[]>): string {
  const parts = [`# ${title}`, ''];
  if (lead.length) parts.push(...lead, '');
  for (const [heading, lines] of Object.entries(sections)) parts.push(`## ${heading}`, '', ...lines, '');
  return parts.join('\n');
}
