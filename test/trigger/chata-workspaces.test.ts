// One chata app installed in several workspaces signs every workspace's deliveries with one secret: only those of a
// workspace the operator names in CHATA_TEAM_IDS start or answer work; a stranger's hears what a channel mapped to
// nothing hears. Signed with the real slash-command fixture (workspace T1DC2JH3J, channel G8PSS9T3V).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { CHATA_TEAM, chataFormHeaders, fixture, post, rowCount, startTestTrigger, type TestTrigger } from './helpers.ts';

const CHANNEL = 'G8PSS9T3V';

/** The fixture with `text`, sent for workspace `team`. */
function slash(text: string, team = CHATA_TEAM): { raw: Buffer; headers: Record<string, string> } {
  const body = fixture('slack-slash-command.txt').toString();
  assert.ok(body.includes(`team_id=${CHATA_TEAM}&`), 'the fixture names its workspace');
  const raw = Buffer.from(body.replace(`team_id=${CHATA_TEAM}&`, `team_id=${team}&`)
    .replace('text=', `text=${encodeURIComponent(text)}`));
  return { raw, headers: chataFormHeaders(raw) };
}

describe('POST /chata from workspaces, with CHATA_TEAM_IDS naming one', () => {
  let t: TestTrigger;
  before(async () => {
    // The --repo shorthand: its one repository is open to every chata channel (chata=*).
    t = await startTestTrigger({ CHATA_TEAM_IDS: CHATA_TEAM });
  });
  after(() => t.cleanup());

  it('queues a slash command from the named workspace', async () => {
    const { raw, headers } = slash('fix the login bug');
    const res = await post(`${t.url}/chata`, raw, headers);
    assert.equal(res.status, 200);
    assert.match(String(res.body.text), /^Queued job j\w{26}\./);
  });

  it('answers a stranger workspace\'s command as a channel mapped to nothing, and queues nothing', async () => {
    const jobs = rowCount(t.stores.db, 'jobs');
    const { raw, headers } = slash('fix the login bug', 'T0STRANGER');
    const res = await post(`${t.url}/chata`, raw, headers);
    assert.equal(res.status, 200);
    assert.equal(res.body.status, 'skipped');
    assert.equal(res.body.text, `Not queued: chata channel "${CHANNEL}" is mapped to no repository `
      + '(it may start work in no repository here).');
    // repo= naming the served repository learns nothing more.
    const named = slash(`repo=${t.settings.repos.entries[0]!.name} fix the login bug`, 'T0STRANGER');
    const picked = await post(`${t.url}/chata`, named.raw, named.headers);
    assert.equal(picked.body.status, 'skipped');
    assert.match(String(picked.body.text), /may not start work in ".*" \(it may start work in no repository here\)\.$/);
    assert.equal(rowCount(t.stores.db, 'jobs'), jobs);
  });
});

describe('POST /chata without CHATA_TEAM_IDS', () => {
  it('answers 503 not_configured naming the variable, and says so at startup', async () => {
    const t = await startTestTrigger({ CHATA_TEAM_IDS: undefined });
    try {
      const { raw, headers } = slash('fix the login bug');
      const res = await post(`${t.url}/chata`, raw, headers);
      assert.equal(res.status, 503);
      assert.equal((res.body.error as { code: string }).code, 'not_configured');
      assert.match((res.body.error as { message: string }).message, /CHATA_TEAM_IDS/);
      assert.ok(t.logs.some((l) => l.level === 'warn' && l.msg.includes('CHATA_TEAM_IDS')));
      assert.equal(rowCount(t.stores.db, 'jobs'), 0);
    } finally {
      await t.cleanup();
    }
  });

  // Slack saves an Event Subscriptions URL only once it answered the signed challenge, which starts and answers no
  // work: the first setup step must not wait on knowing the workspace ids. Unsigned, it is refused as ever.
  it('still answers Slack\'s signed url_verification challenge, and refuses an unsigned one', async () => {
    const t = await startTestTrigger({ CHATA_TEAM_IDS: undefined });
    try {
      const raw = fixture('slack-events-url-verification.json');
      const headers = { ...chataFormHeaders(raw), 'content-type': 'application/json' };
      const res = await post(`${t.url}/chata`, raw, headers);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' });
      const unsigned = await post(`${t.url}/chata`, raw, { 'content-type': 'application/json' });
      assert.equal(unsigned.status, 401);
      assert.equal(rowCount(t.stores.db, 'jobs'), 0);
    } finally {
      await t.cleanup();
    }
  });
});
