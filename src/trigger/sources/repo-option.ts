// `repo=owner/name` in a chat command: the one way a chat message picks a repository, and only among
// the ones its channel may reach (served-repos.ts `chat`). Taken out of the text before it becomes a brief; the rest
// is sanitized again, since removing the token can leave a leading hyphen.
import { sanitizeBrief, DEFAULT_BRIEF_BYTES } from '../../webhook-sources.ts';
import { isRepoName } from '../../engine/repo-name.ts';

export type RepoOption = { kind: 'option'; repo: string | null; text: string } | { kind: 'bad'; reason: string };

const TOKEN = /(^|\s)repo=(\S*)/gi;

export function takeRepoOption(text: string): RepoOption {
  const named = new Set<string>();
  for (const m of text.matchAll(TOKEN)) named.add(m[2]!.toLowerCase());
  if (named.size === 0) return { kind: 'option', repo: null, text };
  if (named.size > 1) return { kind: 'bad', reason: 'name one repository with repo=owner/name, not several' };
  const [repo] = [...named] as [string];
  if (!isRepoName(repo)) return { kind: 'bad', reason: `repo=${repo.slice(0, 120)} is not an owner/name` };
  return { kind: 'option', repo, text: sanitizeBrief(text.replace(TOKEN, ' '), DEFAULT_BRIEF_BYTES) };
}
