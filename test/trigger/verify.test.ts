import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { checkBodyTime, checkSignature } from '../../src/trigger/intake.ts';
import { decodeChatbKey, sourceOf, type SourceName } from '../../src/webhook-sources.ts';
import { fixture, sign } from './helpers.ts';

// Each route's scheme, as its record names it: the checks the trigger runs on its deliveries.
type Header = string | undefined;
const scheme = (route: SourceName) => sourceOf(route).scheme!;
const verifyChata = (secret: string, raw: Buffer, ts: Header, sig: Header, now: number) =>
  checkSignature(scheme('chata'), secret, raw, sig, ts, now);
const hexBody = (route: 'errtrack' | 'trackera') => (secret: string, raw: Buffer, sig: Header) =>
  checkSignature(scheme(route), secret, raw, sig, null, 0);
const hub = (route: 'trackerb' | 'webhook') => (secret: string, raw: Buffer, sig: Header) =>
  checkSignature(scheme(route), secret, raw, sig, null, 0);
const verifyHubSignature = hub('trackerb');
const verifyChatbSignature = (key: Buffer, raw: Buffer, sig: Header) =>
  checkSignature(scheme('chatb'), key, raw, sig, null, 0);
const checkTrackeraTimestamp = (value: unknown, now: number) => checkBodyTime('ms', value, now);
const checkChatbTimestamp = (value: unknown, now: number) => checkBodyTime('iso', value, now);

const SLACK_SECRET = '8f742231b10e8888abcd99yyyzzz85a5';
const SLACK_TS = '1531420618';
const SLACK_SIG = 'v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503';

describe('verifyChata (published chat-A vector)', () => {
  const body = fixture('slack-slash-command.txt');
  const near = Number(SLACK_TS) * 1000 + 10_000;

  it('accepts the published example with the clock near its timestamp', () => {
    assert.equal(verifyChata(SLACK_SECRET, body, SLACK_TS, SLACK_SIG, near), null);
  });
  it('rejects the same signed request once it is more than 300 s old', () => {
    assert.equal(verifyChata(SLACK_SECRET, body, SLACK_TS, SLACK_SIG, near + 300_000), 'stale_timestamp');
  });
  it('rejects a timestamp from more than 300 s in the future', () => {
    assert.equal(verifyChata(SLACK_SECRET, body, SLACK_TS, SLACK_SIG, Number(SLACK_TS) * 1000 - 301_000), 'stale_timestamp');
  });
  it('rejects a tampered body, a wrong secret and a missing header', () => {
    const tampered = Buffer.from(body.toString().replace('text=', 'text=rm'));
    assert.equal(verifyChata(SLACK_SECRET, tampered, SLACK_TS, SLACK_SIG, near), 'bad_signature');
    assert.equal(verifyChata('other', body, SLACK_TS, SLACK_SIG, near), 'bad_signature');
    assert.equal(verifyChata(SLACK_SECRET, body, SLACK_TS, undefined, near), 'missing_signature');
    assert.equal(verifyChata(SLACK_SECRET, body, undefined, SLACK_SIG, near), 'missing_timestamp');
  });
  it('rejects a signature of the wrong length or without the v0= prefix before comparing', () => {
    assert.equal(verifyChata(SLACK_SECRET, body, SLACK_TS, SLACK_SIG.slice(0, -2), near), 'malformed_signature');
    assert.equal(verifyChata(SLACK_SECRET, body, SLACK_TS, SLACK_SIG.slice(3), near), 'malformed_signature');
  });
});

describe('verifyHubSignature (published X-Hub-Signature vector)', () => {
  it('accepts the third-party vector secret "wrong-secret", body "smth"', () => {
    const sig = 'sha256=beb656dd03b5a81bee94aab4966943bf694929fcd359c45a1947277df2541a5d';
    assert.equal(verifyHubSignature('wrong-secret', Buffer.from('smth'), sig), null);
    assert.equal(verifyHubSignature('wrong-secret', Buffer.from('smth!'), sig), 'bad_signature');
    assert.equal(verifyHubSignature('wrong-secret', Buffer.from('smth'), sig.slice(7)), 'malformed_signature');
  });
  it('uses the same scheme for the source host under X-Hub-Signature-256', () => {
    const raw = Buffer.from('{"a":1}');
    assert.equal(hub('webhook')('s', raw, `sha256=${sign.hex('s', raw)}`), null);
  });
});

describe('verifyHexBody and checkTrackeraTimestamp (trackera SDK body)', () => {
  const verifyHexBody = hexBody('trackera');
  const body = fixture('linear-comment-create-sdk-test.json');
  const sig = '8790fcbbea809950be9198408593c2a13f7591bba6c61adb589f709b5e1b186a';

  it('accepts the SDK test body signed with "SECRET"', () => {
    assert.equal(body.length, 550);
    assert.equal(verifyHexBody('SECRET', body, sig), null);
  });
  it('rejects the same body for its stale webhookTimestamp (milliseconds)', () => {
    const ts = (JSON.parse(body.toString()) as { webhookTimestamp: number }).webhookTimestamp;
    assert.equal(ts, 1677611643000);
    assert.equal(checkTrackeraTimestamp(ts, Date.now()), 'stale_timestamp');
    assert.equal(checkTrackeraTimestamp(ts, ts + 299_000), null);
    assert.equal(checkTrackeraTimestamp(String(ts), ts), 'missing_timestamp');
  });
});

describe('verifyChatbSignature (chat-B)', () => {
  const token = 'vqF0En+Z0ucuRTM/01o2GuhMH3hKKk/N2bOmlM31zaA=';
  const body = fixture('teams-outgoing-webhook-message-mention.json');

  it('matches the reference cross-check value over the fixture bytes with the base64-decoded key', () => {
    const key = decodeChatbKey(token)!;
    assert.equal(verifyChatbSignature(key, body, 'HMAC Xq0DLRXD9JoOt0XBN82+8cvmCn4xrc2+BQ2dezg0KBU='), null);
    assert.equal(sign.chatb(token, body), 'HMAC Xq0DLRXD9JoOt0XBN82+8cvmCn4xrc2+BQ2dezg0KBU=');
  });
  it('does not accept a MAC keyed by the token text instead of its decoded bytes', () => {
    const wrong = `HMAC ${sign.hex(token, body) && Buffer.from(sign.hex(token, body), 'hex').toString('base64')}`;
    assert.equal(verifyChatbSignature(decodeChatbKey(token)!, body, wrong), 'bad_signature');
  });
  it('refuses non-base64 tokens and malformed headers', () => {
    assert.equal(decodeChatbKey('not base64!'), null);
    assert.equal(decodeChatbKey(''), null);
    assert.equal(verifyChatbSignature(decodeChatbKey(token)!, body, 'Bearer abc'), 'malformed_signature');
    assert.equal(verifyChatbSignature(decodeChatbKey(token)!, body, undefined), 'missing_signature');
  });
  it('checks the Activity ISO timestamp within 300 s', () => {
    const t = Date.parse('2017-02-01T21:10:07.437Z');
    assert.equal(checkChatbTimestamp('2017-02-01T21:10:07.437Z', t + 200_000), null);
    assert.equal(checkChatbTimestamp('2017-02-01T21:10:07.437Z', t + 301_000), 'stale_timestamp');
    assert.equal(checkChatbTimestamp(undefined, t), 'missing_timestamp');
  });
});

describe('verifyHexBody (errtrack)', () => {
  const verifyHexBody = hexBody('errtrack');
  it('matches the reference cross-check vector over the compact fixture', () => {
    const compact = Buffer.from(JSON.stringify(JSON.parse(fixture('sentry-issue-created.json').toString())));
    const sig = 'eccba0d93d6cd71bcf17d134dc52df643fd30414626a969c57788e58f3d26454';
    assert.equal(verifyHexBody('example-client-secret', compact, sig), null);
    assert.equal(verifyHexBody('example-client-secret', fixture('sentry-issue-created.json'), sig), 'bad_signature');
    assert.equal(verifyHexBody('example-client-secret', compact, 'zz'), 'malformed_signature');
  });
});
