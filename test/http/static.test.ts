import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { startTestControl, type TestControl } from '../helpers/control-server.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { createStaticFiles, UI_CSP } from '../../src/http/static-files.ts';

describe('security', () => {
  describe('static UI files', () => {
    let control: TestControl;
    const pkg = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');

    before(async () => {
      control = await startTestControl();
    });
    after(async () => {
      await control.close();
    });

    it('serves / and a script with the UI content security policy and nosniff', async () => {
      for (const path of ['/', '/app.js']) {
        const res = await rawRequest(control.url, path);
        assert.equal(res.status, 200, path);
        assert.equal(res.headers['content-security-policy'], UI_CSP, path);
        assert.equal(res.headers['x-content-type-options'], 'nosniff', path);
      }
      assert.match((await rawRequest(control.url, '/app.js')).headers['content-type'] as string, /^text\/javascript/);
    });

    it('serves the SDK\'s SSE parser to the UI as a module that parses a stream', async () => {
      const res = await rawRequest(control.url, '/client/sse-parse.js');
      assert.equal(res.status, 200);
      assert.match(res.headers['content-type'] as string, /^text\/javascript/);
      assert.equal(res.headers['content-security-policy'], UI_CSP);
      const served: typeof import('../../src/client/sse-parse.ts') =
        await import(`data:text/javascript;base64,${Buffer.from(res.text).toString('base64')}`);
      const parser = served.createSseParser();
      assert.deepEqual(parser.push('retry: 500\nid: 4\nevent: log\ndata: a\ndata: b\n\n'), [
        { id: '4', event: 'log', data: 'a\nb' },
      ]);
      assert.equal(parser.retryMs(), 500);
    });

    it('answers 304 to an If-None-Match naming its ETag as given, weakened, in a list or as *', async () => {
      const etag = (await rawRequest(control.url, '/app.js')).headers.etag as string;
      for (const tag of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const res = await rawRequest(control.url, '/app.js', { headers: { 'if-none-match': tag } });
        assert.equal(res.status, 304, tag);
        assert.equal(res.text, '', tag);
        assert.equal(res.headers.etag, etag, tag);
      }
      const other = await rawRequest(control.url, '/app.js', { headers: { 'if-none-match': '"other"' } });
      assert.equal(other.status, 200);
    });

    it('answers 404 for a static path that was not there at boot', async () => {
      const res = await rawRequest(control.url, '/no-such-file.js');
      assert.equal(res.status, 404);
      assert.equal(res.headers['content-security-policy'], undefined);
    });

    it('never serves a file from outside the static folder through dot-dot paths', async () => {
      for (const path of ['/../package.json', '/..%2fpackage.json', '/%2e%2e/package.json', '/lib/../../package.json', '/static/../package.json', '//package.json']) {
        const res = await rawRequest(control.url, path);
        assert.notEqual(res.status, 200, path);
        assert.equal(res.text.includes('"devDependencies"'), false, path);
        assert.equal(res.text === pkg, false, path);
      }
    });
  });

  describe('without a static folder', () => {
    it('serves no file (the UI paths fall through to 404) instead of throwing', () => {
      const files = createStaticFiles(fileURLToPath(new URL('./no-such-folder/', import.meta.url)));
      assert.equal(files('/', undefined), null);
      assert.equal(files('/index.html', undefined), null);
    });
  });
});
