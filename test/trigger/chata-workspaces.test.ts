// One chata app installed in several workspaces signs every workspace's deliveries with one secret: only those of a
// workspace the operator names in CHATA_TEAM_IDS start or answer work; a stranger's hears what a channel mapped to
// nothing hears. Signed with the real slash-command fixture (workspace T1DC2JH3J, channel G8PSS9T3V). On Enterprise
// Grid the operator may name the whole organisation (E…) instead: a delivery whose own enterprise_id it is passes.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import {
  CHATA_TEAM, chataFormHeaders, fixture, makeRepo, nowSeconds, post, rowCount, SECRETS, sign, startTestTrigger,
  tempDir, type TestTrigger,
} from './helpers.ts';
import { resolveTriggerSettings } from '../../src/trigger/settings.ts';
import { BadSettingError } from '../../src/errors.ts';

const CHANNEL = 'G8PSS9T3V';

/** The fixture with `text`, sent for workspace `team` (of Grid organisation `enterprise`, placed as Slack does). */
function slash(text: string, team = CHATA_TEAM, enterprise?: string): { raw: Buffer; headers: Record<string, string> } {
  const body = fixture('slack-slash-command.txt').toString();
  assert.ok(body.includes(`team_id=${CHATA_TEAM}&`), 'the fixture names its workspace');
  const grid = enterprise === undefined ? '' : `enterprise_id=${enterprise}&enterprise_name=Globular%20Construct&`;
  const raw = Buffer.from(body.replace(`team_id=${CHATA_TEAM}&`, `team_id=${team}&`)
    .replace('channel_id=', `${grid}channel_id=`)
    .replace('text=', `text=${encodeURIComponent(text)}`));
  return { raw, headers: chataFormHeaders(raw) };
}

/** A person's reply in a thread no job asked in, as the Events API delivers it with `envelope`'s ids. */
function threadReply(envelope: Record<string, unknown>): { raw: Buffer; headers: Record<string, string> } {
  const now = nowSeconds();
  const raw = Buffer.from(JSON.stringify({
    token: 'XXYYZZ', type: 'event_callback', api_app_id: 'A1', event_id: `Ev${randomUUID().slice(0, 8)}`,
    event_time: now, is_ext_shared_channel: false, ...envelope,
    event: { type: 'message', channel: 'C1', user: 'W43567', text: 'use prod', ts: `${now}.000300`,
      thread_ts: '1700000000.000100' },
  }));
  const ts = String(now);
  const signature = sign.chata(SECRETS.CHATA_SIGNING_SECRET, raw, ts);
  return { raw, headers: { 'x-slack-request-timestamp': ts, 'x-slack-signature': signature } };
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

describe('POST /chata from an Enterprise Grid organisation, with CHATA_TEAM_IDS naming it (E…)', () => {
  const GRID = 'E0GRID01';
  const STRANGER = 'Not queued: chata channel "G8PSS9T3V" is mapped to no repository '
    + '(it may start work in no repository here).';
  // Neither a workspace of the organisation nor this server's fixture workspace is named: only the organisation.
  const TEAM = 'T0GRIDWS1';
  let t: TestTrigger;
  before(async () => {
    t = await startTestTrigger({ CHATA_TEAM_IDS: `T0OTHER, ${GRID}` });
  });
  after(() => t.cleanup());

  it('queues a slash command from any workspace of the named organisation', async () => {
    const { raw, headers } = slash('fix the login bug', TEAM, GRID);
    const res = await post(`${t.url}/chata`, raw, headers);
    assert.match(String(res.body.text), /^Queued job j\w{26}\./);
  });

  it('answers a command of another organisation, or of none, as a channel mapped to nothing', async () => {
    const jobs = rowCount(t.stores.db, 'jobs');
    for (const enterprise of ['E0OTHER', undefined, '']) {
      const { raw, headers } = slash('fix the login bug', TEAM, enterprise);
      const res = await post(`${t.url}/chata`, raw, headers);
      assert.equal(res.body.status, 'skipped', String(enterprise));
      assert.equal(res.body.text, STRANGER);
    }
    // The organisation's id where a workspace's belongs does not pass for it, nor does it anywhere but the body.
    const asTeam = slash('fix the login bug', GRID);
    assert.equal((await post(`${t.url}/chata`, asTeam.raw, asTeam.headers)).body.status, 'skipped');
    const inHeader = slash('fix the login bug', TEAM);
    const spoofed = { ...inHeader.headers, 'x-slack-enterprise-id': GRID, 'x-slack-team-id': GRID };
    assert.equal((await post(`${t.url}/chata?enterprise_id=${GRID}`, inHeader.raw, spoofed)).body.status, 'skipped');
    assert.equal(rowCount(t.stores.db, 'jobs'), jobs);
  });

  it('lets a thread reply of the organisation\'s installation look for its job, and no other', async () => {
    const NOT_SERVED = 'a message from a workspace not served here';
    const install = { enterprise_id: GRID, team_id: TEAM, user_id: 'W0BOT', is_bot: true, is_enterprise_install: true };
    const ours = threadReply({ team_id: TEAM, enterprise_id: GRID, authorizations: [install] });
    const found = await post(`${t.url}/chata`, ours.raw, ours.headers);
    assert.equal(found.body.status, 'skipped');
    assert.match(String(found.body.reason), /^no running svc job was asked here/);
    const refusedWith = async (envelope: Record<string, unknown>): Promise<unknown> => {
      const { raw, headers } = threadReply(envelope);
      return (await post(`${t.url}/chata`, raw, headers)).body.reason;
    };
    // Another organisation's installation; a workspace's delivery that names no organisation.
    const other = { ...install, enterprise_id: 'E0OTHER' };
    assert.equal(await refusedWith({ team_id: TEAM, enterprise_id: 'E0OTHER', authorizations: [other] }), NOT_SERVED);
    const { enterprise_id: _none, ...plain } = install;
    assert.equal(await refusedWith({ team_id: TEAM, authorizations: [plain] }), NOT_SERVED);
    // In a channel the named organisation started and shares with a workspace the app is installed in on its own,
    // the envelope names the organisation that started it: it does not vouch for the installation
    // authorizations[0] names.
    const shared = { team_id: 'T0THEIRS', enterprise_id: GRID, authorizations: [plain] };
    assert.equal(await refusedWith(shared), NOT_SERVED);
  });
});

describe('CHATA_TEAM_IDS entries', () => {
  const repo = makeRepo();
  const home = tempDir('svc-home-');
  const resolve = (ids: string) => resolveTriggerSettings(
    { HOME: home, ...SECRETS, SVC_CONTROL_URL: 'http://127.0.0.1:9', CHATA_TEAM_IDS: ids },
    { host: '127.0.0.1', port: '0', repo, db: join(home, 'trigger.db') }, repo);

  it('takes workspace (T…) and organisation (E…) ids, spaced around commas or not', () => {
    assert.deepEqual([...resolve('T1DC2JH3J, E0GRID01,T1').orgs.chata], ['T1DC2JH3J', 'E0GRID01', 'T1']);
  });

  it('refuses anything else as a bad setting naming the variable', () => {
    for (const ids of ['U2CERLKJA', 'T1,W43567', 'e0grid01', 'T', 'T1,', 'T1;E1']) {
      assert.throws(() => resolve(ids), (err: Error) => err instanceof BadSettingError
        && err.message.startsWith('CHATA_TEAM_IDS must be '), ids);
    }
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
