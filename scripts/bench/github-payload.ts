// A source-host (GitHub-style) `issues` `labeled` delivery for POST /webhook, shaped like GitHub's real payload
// (issue, label, repository, sender with their URL fields) and ~2.5 KB, labelled `svc` so the server queues a job.
function account(login: string, id: number): Record<string, unknown> {
  const api = `https://api.github.com/users/${login}`;
  return {
    login, id, node_id: `MDQ6VXNlcj${id}`, avatar_url: `https://avatars.githubusercontent.com/u/${id}?v=4`,
    gravatar_id: '',
    url: api, html_url: `https://github.com/${login}`,
    type: 'User', site_admin: false,
  };
}

export function githubIssuesTemplate(): Record<string, unknown> {
  const repoApi = 'https://api.github.com/repos/acme/api';
  const label = {
    id: 208045946, node_id: 'MDU6TGFiZWwyMDgwNDU5NDY=', url: `${repoApi}/labels/svc`, name: 'svc', color: 'f29513',
    default: false, description: 'Hand to svc',
  };
  return {
    action: 'labeled',
    issue: {
      url: `${repoApi}/issues/@@N@@`, repository_url: repoApi, labels_url: `${repoApi}/issues/@@N@@/labels{/name}`,
      comments_url: `${repoApi}/issues/@@N@@/comments`, html_url: 'https://github.com/acme/api/issues/@@N@@',
      id: '@@ID@@', node_id: '@@NODE@@', number: '@@N@@',
      title: 'Upload client retries forever on 429',
      user: account('octocat', 583231), labels: [label], state: 'open', locked: false, assignee: null, assignees: [],
      milestone: null, comments: 0, created_at: '2026-11-20T10:00:00Z', updated_at: '2026-11-20T10:00:00Z',
      closed_at: null,
      author_association: 'MEMBER', active_lock_reason: null,
      body: 'When the storage API answers 429 the upload client retries immediately and forever. It should back off ' +
        'exponentially with jitter, give up after 5 attempts and surface the last error. Repro: run the upload test ' +
        'against the rate-limited stand-in.',
      timeline_url: `${repoApi}/issues/@@N@@/timeline`, state_reason: null,
    },
    label,
    repository: {
      id: 1296269, node_id: 'MDEwOlJlcG9zaXRvcnkxMjk2MjY5', name: 'api', full_name: 'acme/api', private: true,
      owner: account('acme', 9919), html_url: 'https://github.com/acme/api', description: 'The acme API', fork: false,
      url: repoApi, created_at: '2020-01-01T00:00:00Z', updated_at: '2026-11-20T09:00:00Z',
      pushed_at: '2026-11-20T09:00:00Z',
      default_branch: 'main', visibility: 'private',
    },
    sender: account('octocat', 583231),
  };
}
