// The served repositories file: what it accepts, every bad line refused with its line and reason, the
// server refusing to start on it, and `svc repos list|add|remove` editing it.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseServedRepos, ReposFileError } from '../../src/trigger/served-repos-file.ts';
import { loadServedRepos, shorthandRepos, takeRepoOption } from '../../src/trigger/served-repos.ts';
import { makeRepo, SECRETS, tempDir } from './helpers.ts';
import { resolveTriggerSettings } from '../../src/trigger/settings.ts';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

function problems(text: string): Array<[number, string]> {
  try {
    parseServedRepos(text, 'repos.conf');
  } catch (err) {
    assert.ok(err instanceof ReposFileError);
    return err.problems.map((p) => [p.line, p.reason]);
  }
  return [];
}

describe('parseServedRepos', () => {
  it('reads entries, comments, comma lists and default', () => {
    const [api, web] = parseServedRepos([
      '# the organisation',
      'acme/api checkout=/srv/api errtrack=api,api-worker trackera=API  # inline comment',
      '',
      'acme/web clone=https://github.com/acme/web.git chata=C1 chatb=19:x@thread.skype default',
    ].join('\n'), 'repos.conf');
    assert.deepEqual(api, {
      name: 'acme/api', checkout: '/srv/api', clone: null, isDefault: false, line: 2,
      keys: { errtrack: ['api', 'api-worker'], trackera: ['API'], trackerb: [], chata: [], chatb: [] },
    });
    assert.equal(web!.clone, 'https://github.com/acme/web.git');
    assert.equal(web!.isDefault, true);
  });
  it('refuses every bad line with its number and the reason', () => {
    assert.deepEqual(problems([
      'acme checkout=/srv/a',
      'acme/api',
      'acme/web checkout=relative/path',
      'acme/ops checkout=/srv/ops clone=file:///srv/ops.git',
      'acme/db checkout=/srv/db color=blue',
      'acme/ci clone=http://git.example/ci.git',
      'acme/cd clone=https://user:hunter2@git.example/cd.git',
      'acme/x.git checkout=/srv/x',
      'acme/dd checkout=/srv/dd default default',
      'acme/ee checkout=',
      'acme/ff clone=not-a-url',
      'acme/gg clone=file://host/srv/gg.git',
      'acme/hh checkout=/srv/hh errtrack=a,,b',
      'acme/ii clone=git@github.com:acme/ii.git',
    ].join('\n')), [
      [1, '"acme" is not a repository owner/name (a checkout with no origin: local/acme)'],
      [2, 'each repository needs checkout=DIR or clone=URL'],
      [3, 'checkout= must be an absolute directory path'],
      [4, 'give one checkout= or clone=, not two'],
      [5, 'unknown "color" (known: checkout=, clone=, errtrack=, trackera=, trackerb=, chata=, chatb=, default)'],
      [6, 'clone URLs over http: are not allowed: give an https://, ssh://, file:// or git@host:owner/name URL'],
      [7, 'a clone URL must not hold a password: svc sends GITHUB_TOKEN to the origin host itself'],
      [8, '"acme/x.git" is not a repository owner/name'],
      [9, '"default" is given twice'],
      [10, 'checkout= needs a value'],
      [11, 'clone= must be an https://, ssh://, file:// or git@host:owner/name URL'],
      [12, 'a file:// clone URL names an absolute local path (file:///srv/git/api.git)'],
      [13, 'errtrack= needs one or more comma-separated values without spaces'],
    ]);
  });
  it('refuses a name, checkout, routing key or default claimed twice, naming the first line', () => {
    assert.deepEqual(problems([
      'acme/api checkout=/srv/api errtrack=front-end trackera=ENG default',
      'Acme/API checkout=/srv/other',
      'acme/web checkout=/srv/api',
      'acme/ops checkout=/srv/ops errtrack=front-end trackera=eng default',
    ].join('\n')), [
      [2, 'repository "Acme/API" is already on line 1'],
      [3, 'checkout /srv/api is already on line 1'],
      [4, '"default" is already on line 1'],
      [4, 'errtrack=front-end is already on line 1'],
      [4, 'trackera=eng is already on line 1'],
    ]);
  });
  it('refuses one checkout claimed twice under another spelling', () => {
    assert.deepEqual(problems('acme/api checkout=/srv/api\nevil/x checkout=/srv//api/.'), [
      [2, 'checkout /srv//api/. is already on line 1'],
    ]);
  });
  it('lets one chat channel reach several entries and opens an entry to every channel only with chata=*', () => {
    const [api, web] = parseServedRepos([
      'acme/api checkout=/srv/api chata=C1 chatb=19:x@thread.skype',
      'acme/web checkout=/srv/web chata=C1,* chatb=*',
    ].join('\n'), 'repos.conf');
    assert.deepEqual([api!.keys.chata, web!.keys.chata, web!.keys.chatb], [['C1'], ['C1', '*'], ['*']]);
    // "Every project" is what `default` says for the other sources; a wildcard there would be a second way.
    assert.deepEqual(problems('acme/api checkout=/srv/api errtrack=*\nacme/web checkout=/srv/web trackerb=A,*'), [
      [1, 'errtrack=* is not allowed: only chata=* and chatb=* open an entry to every channel (see "default")'],
      [2, 'trackerb=* is not allowed: only chata=* and chatb=* open an entry to every channel (see "default")'],
    ]);
  });
  it('refuses a file that serves nothing', () => {
    assert.deepEqual(problems('# nothing yet\n'), [[1, 'the file serves no repository']]);
  });
});

describe('loadServedRepos', () => {
  it('refuses a missing checkout and one that is not a git work tree, and takes a clone URL', () => {
    const dir = tempDir('svc-repos-');
    const file = join(dir, 'repos.conf');
    const lines = [
      `acme/api checkout=${join(dir, 'missing')}`, `acme/web checkout=${dir}`, 'acme/ops clone=file:///g/ops.git',
    ];
    writeFileSync(file, `${lines.join('\n')}\n`);
    assert.throws(() => loadServedRepos(file), (err: unknown) => {
      assert.ok(err instanceof ReposFileError);
      assert.deepEqual(err.problems.map((p) => [p.line, p.reason]), [
        [1, `checkout ${join(dir, 'missing')} is not a directory`],
        [2, `checkout ${dir} is not a git work tree`],
      ]);
      return true;
    });
    writeFileSync(file, 'acme/ops clone=file:///g/ops.git default\n');
    assert.deepEqual(loadServedRepos(file).entries.map((e) => [e.name, e.clone]), [['acme/ops', 'file:///g/ops.git']]);
    assert.throws(() => loadServedRepos(join(dir, 'none.conf')), /none\.conf:0: cannot read the file \(ENOENT\)/);
  });

  it('says how to write a file that does not exist, and quotes no empty line', () => {
    const dir = tempDir('svc-repos-');
    const file = join(dir, 'none.conf');
    assert.throws(() => loadServedRepos(file), (err: unknown) => {
      assert.ok(err instanceof ReposFileError);
      assert.equal(err.message, `Invalid served repositories file:\n${file}:0: cannot read the file (ENOENT): `
        + `write it with "svc repos add --file ${file} OWNER/NAME checkout=DIR"`);
      return true;
    });
  });
});

describe('loadServedRepos, one checkout through a link', () => {
  it('refuses a second entry whose checkout is the first one\'s folder reached through a link', () => {
    const repo = makeRepo();
    const dir = tempDir('svc-repos-');
    const link = join(dir, 'same');
    symlinkSync(repo, link);
    const file = join(dir, 'repos.conf');
    writeFileSync(file, `acme/api checkout=${repo}\nevil/x checkout=${link}\n`);
    assert.throws(() => loadServedRepos(file), (err: unknown) => {
      assert.ok(err instanceof ReposFileError);
      assert.deepEqual(err.problems.map((p) => [p.line, p.reason]), [[2, `checkout ${link} is the folder of line 1`]]);
      return true;
    });
  });
});

describe('shorthandRepos', () => {
  it('names a checkout without a GitHub origin local/<folder>, which takes every source but GitHub', () => {
    const dir = tempDir('svc-plain-');
    assert.equal(spawnSync('git', ['init', '-q', dir]).status, 0);
    const router = shorthandRepos(dir, `--repo ${dir}`);
    assert.match(router.entries[0]!.name, /^local\/svc-plain-/);
    assert.equal(router.route('errtrack', 'api').kind, 'repo');
    assert.deepEqual(router.webhook('acme/api'), {
      kind: 'unserved', reason: 'the served checkout has no GitHub origin; name it in a repositories file',
    });
  });
});

describe('resolveTriggerSettings, a served checkout without an origin', () => {
  const home = tempDir('svc-home-');
  const settings = (repo: string, env: Record<string, string>) => resolveTriggerSettings(
    { HOME: home, SVC_CONTROL_URL: 'http://127.0.0.1:9', ...env },
    { host: '127.0.0.1', port: '0', repo, db: join(home, 'trigger.db') }, repo);
  const plain = tempDir('svc-plain-');
  assert.equal(spawnSync('git', ['init', '-q', plain]).status, 0);

  it('warns at start that every job of a route that opens a pull request would fail there, naming the fix', () => {
    const { warnings } = settings(plain, SECRETS).problems;
    const name = `local/${basename(plain)}`;
    assert.deepEqual(warnings.filter((w) => w.startsWith('Served checkout')), [
      `Served checkout ${plain} (${name}) cannot open a pull request, so every job from /errtrack, /trackerb, `
      + '/chatb and /jobs with "pr": true fails as it starts (each runs svc start --pr): The repository\'s git config '
      + 'must name exactly one remote.origin.url (found 0): add the GitHub repository, `git remote add origin '
      + 'https://github.com/OWNER/NAME.git`',
    ]);
  });

  it('counts /jobs among those routes when its token is set, as its caller may ask for a pull request', () => {
    const { warnings } = settings(plain, { SVC_API_TOKEN: SECRETS.SVC_API_TOKEN }).problems;
    assert.deepEqual(warnings.filter((w) => w.startsWith('Served checkout')).map((w) => w.split(' fails ')[0]), [
      `Served checkout ${plain} (local/${basename(plain)}) cannot open a pull request, so every job from /jobs with `
      + '"pr": true',
    ]);
  });

  it('warns of an origin on another host than GitHub\'s, where no pull request can be opened', () => {
    const elsewhere = tempDir('svc-gitlab-');
    assert.equal(spawnSync('git', ['init', '-q', elsewhere]).status, 0);
    assert.equal(spawnSync('git', ['-C', elsewhere, 'remote', 'add', 'origin', 'https://gitlab.example/acme/api.git'])
      .status, 0);
    const { warnings } = settings(elsewhere, SECRETS).problems;
    assert.deepEqual(warnings.filter((w) => w.startsWith('Served checkout')), [
      `Served checkout ${elsewhere} (acme/api) cannot open a pull request, so every job from /errtrack, /trackerb, `
      + '/chatb and /jobs with "pr": true fails (each runs svc start --pr): its origin is on gitlab.example, and '
      + 'svc opens pull requests only on github.com (GitHub, or the host of GITHUB_API_URL)',
    ]);
    const enterprise = settings(elsewhere, { ...SECRETS, GITHUB_API_URL: 'https://gitlab.example/api/v3' });
    assert.deepEqual(enterprise.problems.warnings.filter((w) => w.startsWith('Served checkout')), []);
  });

  it('leaves an ssh origin alone, whose host may be an alias of the user\'s ssh config for GitHub\'s', () => {
    const aliased = tempDir('svc-ssh-alias-');
    assert.equal(spawnSync('git', ['init', '-q', aliased]).status, 0);
    assert.equal(spawnSync('git', ['-C', aliased, 'remote', 'add', 'origin', 'git@github-work:acme/api.git']).status, 0);
    const { warnings } = settings(aliased, SECRETS).problems;
    assert.deepEqual(warnings.filter((w) => w.startsWith('Served checkout')), []);
  });

  it('reaches the Control Plane at SVC_CONTROL_URL as set in an env file, spaces around and all', () => {
    assert.equal(settings(plain, { SVC_CONTROL_URL: ' HTTP://127.0.0.1:9/ \r' }).controlUrl, 'HTTP://127.0.0.1:9/');
  });

  it('says nothing with an origin, or when no route that opens a pull request is configured', () => {
    const served = settings(makeRepo('acme/api'), SECRETS).problems.warnings;
    assert.deepEqual(served.filter((w) => w.startsWith('Served checkout')), []);
    const chatOnly = settings(plain, { TRACKERA_WEBHOOK_SECRET: SECRETS.TRACKERA_WEBHOOK_SECRET }).problems.warnings;
    assert.deepEqual(chatOnly.filter((w) => w.startsWith('Served checkout')), []);
  });
});

describe('a repositories file entry named local/<folder>', () => {
  // The name svc gives a checkout with no origin, as the file's own hint says: not GitHub's repository of that name,
  // whose owner (an account called "local") could send it events through a GitHub App anyone may install.
  it('takes no GitHub event, as the --repo shorthand\'s checkout with no origin takes none', () => {
    const dir = tempDir('svc-local-entry-');
    const file = join(dir, 'repos.conf');
    writeFileSync(file, `local/acme checkout=${makeRepo('acme/acme')}\nacme/api checkout=${makeRepo('acme/api')}\n`);
    const router = loadServedRepos(file);
    assert.equal(router.webhook('local/acme').kind, 'unserved');
    assert.equal(router.webhook('Local/Acme').kind, 'unserved');
    assert.equal(router.webhook('acme/api').kind, 'repo');
    assert.equal(router.byName('acme')?.name, 'local/acme', '/jobs still names it by its folder');
  });
});

describe('takeRepoOption', () => {
  it('takes repo=owner/name out of chat text and refuses two or a malformed one', () => {
    const taken = takeRepoOption('fix it repo=acme/api now');
    assert.deepEqual(taken, { kind: 'option', repo: 'acme/api', text: 'fix it now' });
    assert.deepEqual(takeRepoOption('fix it'), { kind: 'option', repo: null, text: 'fix it' });
    assert.equal(takeRepoOption('repo=acme/api repo=acme/web x').kind, 'bad');
    assert.equal(takeRepoOption('repo=../etc x').kind, 'bad');
  });
});

function svc(args: string[], env: NodeJS.ProcessEnv, cwd?: string) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env, ...(cwd ? { cwd } : {}) });
}

describe('svc repos and svc trigger serve --repos', () => {
  it('lists nothing on a fresh machine with exit 0, saying what the server serves then and how to add one', () => {
    const home = tempDir('svc-home-');
    const list = svc(['repos', 'list'], { PATH: process.env.PATH, HOME: home });
    const file = join(home, '.svc', 'trigger', 'repos.conf');
    assert.deepEqual([list.status, list.stdout], [0, '']);
    assert.equal(list.stderr, `No repositories file at ${file}: the trigger server serves --repo DIR (or its current `
      + 'directory); svc repos add OWNER/NAME checkout=DIR writes one\n');
  });

  it('adds, lists and removes entries, refusing a bad one with its reason and no line the file does not have', () => {
    const home = tempDir('svc-home-');
    const api = makeRepo('acme/api');
    const env = { PATH: process.env.PATH, HOME: home };
    const file = join(home, '.svc', 'trigger', 'repos.conf');

    const added = svc(['repos', 'add', 'acme/api', `checkout=${api}`, 'errtrack=api', 'default'], env);
    assert.equal(added.status, 0, added.stderr);
    assert.equal(readFileSync(file, 'utf8'), `acme/api checkout=${api} errtrack=api default\n`);
    const clone = svc(['repos', 'add', 'acme/web', 'clone=https://github.com/acme/web.git', 'trackerb=WEB'], env);
    assert.equal(clone.status, 0, clone.stderr);
    assert.equal(clone.stdout, 'Added acme/web clone=https://github.com/acme/web.git trackerb=WEB to '
      + `${file}\nA trigger server serving this file uses it from its next delivery; no restart is needed.\n`);
    const password = svc(['repos', 'add', 'acme/cd', 'clone=https://u:hunter2@github.com/acme/cd.git'], env);
    assert.equal(password.status, 2);
    assert.equal(password.stderr, 'svc repos: Not added: a clone URL must not hold a password: svc sends GITHUB_TOKEN to '
      + 'the origin host itself\n');
    assert.doesNotMatch(readFileSync(file, 'utf8'), /hunter2/);

    const taken = svc(['repos', 'add', 'acme/ops', `checkout=${api}`, 'errtrack=api'], env);
    assert.equal(taken.status, 2);
    assert.equal(taken.stderr, `svc repos: Not added: checkout ${api} is already on line 1\n`
      + 'Not added: errtrack=api is already on line 1\n');
    const missing = svc(['repos', 'add', 'acme/ops', 'checkout=/nonexistent/ops'], env);
    assert.equal(missing.status, 2);
    assert.equal(missing.stderr, 'svc repos: Not added: checkout /nonexistent/ops is not a directory\n');
    // The server reads each checkout through its links: the same folder under another name is refused here too.
    const link = join(home, 'api-link');
    symlinkSync(api, link);
    const linked = svc(['repos', 'add', 'acme/ops', `checkout=${link}`], env);
    assert.equal(linked.status, 2);
    assert.equal(linked.stderr, `svc repos: Not added: checkout ${link} is the folder of line 1\n`);

    const list = svc(['repos', 'list'], env);
    assert.equal(list.status, 0);
    const web = 'acme/web clone=https://github.com/acme/web.git trackerb=WEB';
    assert.equal(list.stdout, `acme/api checkout=${api} errtrack=api default\n${web}\n`);

    const removed = svc(['repos', 'remove', 'acme/web'], env);
    assert.equal(removed.status, 0, removed.stderr);
    assert.equal(readFileSync(file, 'utf8'), `acme/api checkout=${api} errtrack=api default\n`);
    assert.equal(svc(['repos', 'remove', 'acme/web'], env).status, 1);
  });

  it('refuses to remove the last repository, which would leave a file the server refuses to start on', () => {
    const home = tempDir('svc-home-');
    const api = makeRepo('acme/api');
    const env = { PATH: process.env.PATH, HOME: home };
    const file = join(home, '.svc', 'trigger', 'repos.conf');
    assert.equal(svc(['repos', 'add', 'acme/api', `checkout=${api}`], env).status, 0);
    writeFileSync(file, `# served here\n${readFileSync(file, 'utf8')}`);

    const last = svc(['repos', 'remove', 'ACME/api'], env);
    assert.equal(last.status, 1);
    assert.equal(last.stdout, '');
    assert.equal(last.stderr, `svc repos: Not removed: ACME/api is the only repository ${file} serves, and a trigger `
      + `server refuses a file that serves none; delete the file instead (rm ${file}) to serve one checkout with `
      + '--repo DIR\n');
    assert.equal(readFileSync(file, 'utf8'), `# served here\nacme/api checkout=${api}\n`);
    const list = svc(['repos', 'list'], env);
    assert.equal(list.status, 0, list.stderr);
    assert.equal(list.stdout, `acme/api checkout=${api}\n`);
  });

  it('refuses to start on an invalid file, naming the line and the reason, with exit 2', () => {
    const home = tempDir('svc-home-');
    const file = join(home, 'repos.conf');
    writeFileSync(file, 'acme/api checkout=/srv/api\nacme/web checkout=/srv/api\n');
    const res = svc(['trigger', 'serve', '--port', '0', '--repos', file], { PATH: process.env.PATH, HOME: home });
    assert.equal(res.status, 2);
    assert.match(res.stderr, /repos\.conf:2: checkout \/srv\/api is already on line 1/);
    const both = svc(['trigger', 'serve', '--repos', file, '--repo', home], { PATH: process.env.PATH, HOME: home });
    assert.equal(both.status, 2);
    assert.match(both.stderr, /Give --repos FILE or --repo DIR, not both/);
    const bothVariables = svc(['trigger', 'serve'], { PATH: process.env.PATH, HOME: home, SVC_TRIGGER_REPOS: file, SVC_TRIGGER_REPO: home });
    assert.equal(bothVariables.status, 2);
    assert.match(bothVariables.stderr, /Set SVC_TRIGGER_REPOS or SVC_TRIGGER_REPO, not both/);
  });
});
