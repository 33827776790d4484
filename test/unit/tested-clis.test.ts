// The tested CLI versions live in one source file (src/engine/cli-version.ts); the suite's pins decide them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { TESTED_CLIS, versionStanding, untestedWarning } from '../../src/engine/cli-version.ts';

const PINS = new URL('../providers/versions.json', import.meta.url);

describe('tested provider CLI versions', () => {
  it('are exactly the versions test/providers/versions.json pins for the conformance suite', () => {
    const pins = JSON.parse(readFileSync(PINS, 'utf8')) as Record<string, string>;
    const tested = Object.fromEntries(Object.values(TESTED_CLIS).map((t) => [t.package, t.version]));
    assert.deepEqual(tested, pins);
  });

  it('name a caret range: the same major from the tested version up, the same minor for 0.x', () => {
    const testedRange = (provider: string) => versionStanding(provider, null).tested_range;
    assert.equal(testedRange('claude'), '>=2.1.330 <3.0.0');
    assert.equal(testedRange('codex'), '>=0.169.0 <0.170.0');
    assert.equal(testedRange('gemini'), '>=0.61.0 <0.62.0');
    assert.equal(testedRange('opencode'), '>=1.18.33 <2.0.0');
    assert.equal(testedRange('aider'), null, 'aider was never driven (PyPI is out of reach)');
  });

  it('place a found version inside or outside the range, and leave unknowns null', () => {
    assert.equal(versionStanding('claude', '2.1.330').within_tested_range, true);
    assert.equal(versionStanding('claude', '2.9.0').within_tested_range, true);
    assert.equal(versionStanding('claude', '3.0.0').within_tested_range, false);
    assert.equal(versionStanding('claude', '2.1.200').within_tested_range, false);
    assert.equal(versionStanding('codex', '0.170.1').within_tested_range, false);
    assert.equal(versionStanding('claude', 'not a version').within_tested_range, null);
    assert.equal(versionStanding('claude', null).within_tested_range, null);
    const none = { tested_version: null, tested_range: null, within_tested_range: null };
    assert.deepEqual(versionStanding('aider', '0.86.0'), none);
  });

  it('warn about an untested version naming the tested range, and stay quiet otherwise', () => {
    const warning = untestedWarning('claude', '3.0.1') ?? '';
    assert.match(warning, /claude 3\.0\.1 is outside .*>=2\.1\.330 <3\.0\.0.*2\.1\.330/);
    assert.equal(untestedWarning('claude', '2.1.331'), null);
    assert.equal(untestedWarning('claude', null), null);
    assert.equal(untestedWarning('aider', '1.0.0'), null);
  });
});
