// Keeps secrets out of stored notifications whoever the caller is: a target is a host, URLs in error text lose their
// path.
// Chat reply URLs carry capability tokens in their path, so a full URL must never be stored or served.

/** A URL becomes its host (no user info, path or query); a bare host name stays; anything else becomes null. */
export function hostOnly(target: string | null): string | null {
  if (target === null || target.length === 0) return null;
  try {
    const url = new URL(target);
    if (url.hostname) return url.host.slice(0, 255);
  } catch {
    // not a URL: judged below
  }
  return /^[A-Za-z0-9.-]{1,253}(:\d{1,5})?$/.test(target) ? target : null;
}

/** Error text with every URL cut to scheme and host, capped at 500 characters. */
export function scrubError(error: string | null): string | null {
  if (error === null || error.length === 0) return null;
  const scrubbed = error.replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]+/gi, (match) => {
    try {
      const url = new URL(match);
      return `${url.protocol}//${url.host}/…`;
    } catch {
      return '[url]';
    }
  });
  return scrubbed.slice(0, 500);
}
