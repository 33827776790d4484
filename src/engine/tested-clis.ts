// The provider CLI versions the conformance suite (`npm run test:providers`) drove end to end, and the range each
// proves: the same major line from that version up (caret semantics; for 0.x the same minor). One home for these
// figures: test/unit/tested-clis.test.ts holds them equal to the pins in test/providers/versions.json.

export interface TestedCli {
  /** The npm package the suite installs. */
  package: string;
  /** The exact version it drove. */
  version: string;
}

/** aider is on PyPI only, out of these machines' reach: no version of it was driven, so it has no entry. */
export const TESTED_CLIS: Readonly<Record<string, TestedCli>> = {
  claude: { package: '@anthropic-ai/claude-code', version: '2.1.330' },
  codex: { package: '@openai/codex', version: '0.169.0' },
  gemini: { package: '@google/gemini-cli', version: '0.61.0' },
  opencode: { package: 'opencode-ai', version: '1.18.33' },
};

type Triple = [number, number, number];

function parse(version: string): Triple | null {
  const m = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : null;
}

function compare(a: Triple, b: Triple): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}

/** The first version past the range: the next major, or for 0.x the next minor (as npm's caret reads it). */
function ceiling(v: Triple): Triple {
  return v[0] > 0 ? [v[0] + 1, 0, 0] : [0, v[1] + 1, 0];
}

/** `>=2.1.330 <3.0.0` for a provider the suite drove; null for one it did not. */
export function testedRange(provider: string): string | null {
  const tested = TESTED_CLIS[provider];
  const low = tested ? parse(tested.version) : null;
  return low ? `>=${low.join('.')} <${ceiling(low).join('.')}` : null;
}

export interface VersionStanding {
  /** The version the suite drove, or null when it drove none of this provider. */
  tested_version: string | null;
  tested_range: string | null;
  /** Whether `version` lies in the tested range; null when either is unknown. */
  within_tested_range: boolean | null;
}

export function versionStanding(provider: string, version: string | null): VersionStanding {
  const tested = TESTED_CLIS[provider] ?? null;
  const low = tested ? parse(tested.version) : null;
  const found = version === null ? null : parse(version);
  const within = low && found ? compare(found, low) >= 0 && compare(found, ceiling(low)) < 0 : null;
  return { tested_version: tested?.version ?? null, tested_range: testedRange(provider), within_tested_range: within };
}

/** The warning a run logs when its provider's version lies outside the tested range; null when it does not. */
export function untestedWarning(provider: string, version: string | null): string | null {
  const standing = versionStanding(provider, version);
  if (standing.within_tested_range !== false) return null;
  return `warning: ${provider} ${version} is outside the range the provider conformance suite tested ` +
    `(${standing.tested_range}, driven at ${standing.tested_version}); its flags or output may have changed`;
}
