// Errors are typed end to end (DESIGN §8): every error svc throws on purpose carries a code, the CLI's exit status
// comes from one table of codes, and callers tell errors apart by code, never by message.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  SvcError, UsageError, BadInputError, BadSettingError, NotFoundError, RefusedError,
  FailedError, exitStatusOf,
} from '../../src/errors.ts';
import { HttpError } from '../../src/http/http-error.ts';
import { ControlApiError } from '../../src/client/client.ts';
import { classifyInput } from '../../src/engine/spec.ts';
import { resolveRepo } from '../../src/engine/launch.ts';
import { PolicyError } from '../../src/engine/policy.ts';
import { failedRequiredCheck } from '../../src/engine/receipt.ts';

describe('typed errors', () => {
  it('exits 2 for what the person typed or set, 1 for everything else', () => {
    assert.equal(exitStatusOf(new UsageError('x')), 2);
    assert.equal(exitStatusOf(new BadInputError('x')), 2);
    assert.equal(exitStatusOf(new BadSettingError('x')), 2);
    assert.equal(exitStatusOf(new NotFoundError('x')), 1);
    assert.equal(exitStatusOf(new FailedError('x')), 1);
    assert.equal(exitStatusOf(new Error('x')), 1);
    assert.equal(exitStatusOf('a string'), 1);
  });

  it('reads no exit status off an error that merely has an exitCode property', () => {
    assert.equal(exitStatusOf(Object.assign(new Error('x'), { exitCode: 2 })), 1);
  });

  it('maps a code from another table (HTTP, a server answer) to 1, not to a CLI status', () => {
    assert.equal(exitStatusOf(new HttpError('bad_request', 'x')), 1);
    assert.equal(exitStatusOf(new ControlApiError(400, 'usage', 'x')), 1);
  });

  it('names each error by its class and keeps the code on subclasses', () => {
    const err = new PolicyError('x');
    assert.ok(err instanceof SvcError && err instanceof RefusedError);
    assert.equal(err.code, 'refused');
    assert.equal(err.name, 'PolicyError');
  });

  it('carries the HTTP error code and status together', () => {
    const err = new HttpError('not_found', 'x');
    assert.equal(err.code, 'not_found');
    assert.equal(err.status, 404);
  });

  it('has the engine throw typed errors where the CLI once chose an exit code', () => {
    assert.throws(() => classifyInput('', { forceBrief: false, cwd: tmpdir() }), { code: 'bad_input' });
    const dir = mkdtempSync(join(tmpdir(), 'svc-errors-'));
    try {
      // git's own reason goes with it: "not a git repository" here, "dubious ownership" where that is why.
      assert.throws(() => resolveRepo(dir), { code: 'bad_input', message: /^Not a git repository: ".*" \(.*not a git/ });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('finds a failed required check as a value, not from a message', () => {
    const check = (name: string, required: boolean, exit_code: number | null) => ({ name, required, exit_code });
    assert.equal(failedRequiredCheck([check('lint', false, 1), check('test', true, 0)]), null);
    assert.equal(failedRequiredCheck([check('lint', false, 1), check('test', true, 3)])?.name, 'test');
    assert.equal(failedRequiredCheck([check('test', true, null)])?.name, 'test');
  });

  it('throws no untyped Error anywhere in src/ (a programming error is a TypeError or RangeError at most)', () => {
    const src = fileURLToPath(new URL('../../src/', import.meta.url));
    const files = (dir: string): string[] => readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []);
    const untyped = files(src).flatMap((file) => readFileSync(file, 'utf8').split('\n')
      .map((line, i) => (/\bthrow new Error\(/.test(line) ? `${relative(src, file)}:${i + 1}` : null))
      .filter((hit): hit is string => hit !== null));
    assert.deepEqual(untyped, []);
  });

  it('types the errors of the engine config and of a failed git', async () => {
    const { readEngineConfigFile } = await import('../../src/engine/config.ts');
    const { git } = await import('../../src/engine/git.ts');
    const dir = mkdtempSync(join(tmpdir(), 'svc-errors-'));
    try {
      const { mkdirSync, writeFileSync } = await import('node:fs');
      mkdirSync(join(dir, '.svc'));
      writeFileSync(join(dir, '.svc', 'config.json'), '{"colour":1}');
      assert.throws(() => readEngineConfigFile(dir), { code: 'bad_setting' });
      assert.throws(() => git(dir, ['rev-parse', 'HEAD']), { code: 'failed' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('failure classes of typed errors (src/engine/run-state.ts failureOf, the one map)', async () => {
  const { failureOf } = await import('../../src/engine/run-state.ts');
  const { InfraError } = await import('../../src/errors.ts');
  const { ProviderMissingError } = await import('../../src/engine/providers.ts');
  const { PolicyError } = await import('../../src/engine/policy.ts');
  const { TrustNeededError } = await import('../../src/engine/config.ts');
  const { SandboxUnavailableError } = await import('../../src/spawn/sandbox-mode.ts');
  const { PushRefusedError } = await import('../../src/engine/git-push.ts');
  const { runFailure } = await import('../../src/run-json.ts');

  it('classes an error by its type, whatever its message says', () => {
    const sameWords = 'the agent sandbox did not start';
    const cases: Array<[unknown, string]> = [
      [new InfraError(sameWords, { beforeAgent: true }), 'infra'],
      [new FailedError(sameWords), 'infra'],
      [new ProviderMissingError(sameWords), 'config'],
      [new SandboxUnavailableError(sameWords), 'config'],
      [new PolicyError(sameWords), 'config'],
      [new TrustNeededError(sameWords), 'config'],
      [new BadSettingError(sameWords), 'config'],
      [new BadInputError(sameWords), 'config'],
      [new RefusedError(sameWords), 'policy'],
      [new PushRefusedError(sameWords), 'policy'],
      [Object.assign(new Error('no space'), { code: 'ENOSPC' }), 'infra'],
    ];
    for (const [err, cls] of cases) {
      const failure = failureOf(err);
      assert.equal(failure.class, cls, (err as Error).constructor.name);
      assert.equal(failure.reason, (err as Error).message);
      assert.equal(failure.retryable, cls === 'infra');
    }
  });

  it('keeps a reason to one line\'s worth', () => {
    const long = runFailure('infra', `git said: ${'x'.repeat(10_000)}`);
    assert.equal(long.reason.length, 2000);
    assert.ok(long.reason.endsWith('…'));
  });
});
