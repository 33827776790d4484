// A trackerb (Jira-Cloud-style) `jira:issue_created` delivery shaped and sized like the captured one in
// shared/fixtures/webhooks/jira-issue-created.json (~11 KB: user objects, avatar URLs, dozens of custom
// fields), assigned to BENCH_ASSIGNEE so the server's assignee filter accepts it.
export const BENCH_ASSIGNEE = '712020:f1ad7cfd-7f82-4dc0-85e4-8bc47bcc08e4';
const SITE = 'https://example-test.atlassian.net';
const API = `${SITE}/rest/api/2`;

function user(name: string): Record<string, unknown> {
  const avatar = 'https://secure.gravatar.com/avatar/25e5cc68b1a5228c32a588ebb6204683?d=https%3A%2F%2F' +
    'avatar-management--avatars.us-west-2.prod.public.atl-paas.net%2Finitials%2FSM-6.png';
  return {
    self: `${API}/user?accountId=${encodeURIComponent(BENCH_ASSIGNEE)}`,
    accountId: BENCH_ASSIGNEE,
    avatarUrls: { '48x48': avatar, '24x24': avatar, '16x16': avatar, '32x32': avatar },
    displayName: name,
    active: true,
    timeZone: 'Asia/Calcutta',
    accountType: 'atlassian',
  };
}

export function trackerbTemplate(): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    statuscategorychangedate: '2024-12-29T08:41:23.904+0530',
    issuetype: {
      self: `${API}/issuetype/10001`, id: '10001', description: 'Tasks track small, distinct pieces of work.',
      name: 'Task', subtask: false, avatarId: 10318, hierarchyLevel: 0,
    },
    project: {
      self: `${API}/project/10000`, id: '10000', key: 'BENCH', name: 'Bench', projectTypeKey: 'software',
      simplified: true,
    },
    priority: {
      self: `${API}/priority/3`, iconUrl: `${SITE}/images/icons/priorities/medium.svg`, name: 'Medium', id: '3',
    },
    status: {
      self: `${API}/status/10000`, description: '', name: 'To Do', id: '10000',
      statusCategory: { self: `${API}/statuscategory/2`, id: 2, key: 'new', colorName: 'blue-gray', name: 'To Do' },
    },
    labels: [],
    assignee: user('Bench Assignee'),
    reporter: user('Bench Reporter'),
    creator: user('Bench Reporter'),
    summary: 'Add back button to pages',
    description: 'Add back button navigation to all list pages. Now its making little complex or making UX low.',
    created: '2024-12-29T08:41:23.659+0530',
    updated: '2024-12-29T08:41:23.659+0530',
    watches: { self: `${API}/issue/BENCH-1/watchers`, watchCount: 0, isWatching: true },
    votes: { self: `${API}/issue/BENCH-1/votes`, votes: 0, hasVoted: false },
    progress: { progress: 0, total: 0 },
    aggregateprogress: { progress: 0, total: 0 },
    timetracking: {},
    attachment: [],
    subtasks: [],
    issuelinks: [],
    components: [],
    fixVersions: [],
    versions: [],
  };
  const parentLink = {
    hasEpicLinkFieldDependency: false, showField: false,
    nonEditableReason: {
      reason: 'PLUGIN_LICENSE_ERROR', message: 'The Parent Link is only available to Jira Premium users.',
    },
  };
  for (let i = 0; i < 40; i++) fields[`customfield_100${String(i).padStart(2, '0')}`] = i % 4 === 0 ? parentLink : null;
  return {
    timestamp: 1735441883659,
    webhookEvent: 'jira:issue_created',
    issue_event_type_name: 'issue_created',
    user: user('Bench Reporter'),
    issue: { id: '10021', self: `${API}/10021`, key: 'BENCH-1', fields },
    changelog: {
      id: '10025',
      items: [
        { field: 'assignee', fieldtype: 'jira', fieldId: 'assignee', from: null, fromString: null, to: BENCH_ASSIGNEE,
          toString: 'Bench Assignee', tmpFromAccountId: null, tmpToAccountId: BENCH_ASSIGNEE },
        { field: 'summary', fieldtype: 'jira', fieldId: 'summary', from: null, fromString: null, to: null,
          toString: 'Add back button to pages' },
      ],
    },
  };
}
