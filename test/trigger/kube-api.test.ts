import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:https';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { createKubeApi, inClusterApiUrl } from '../../src/trigger/kubernetes-executor.ts';
import { tempDir } from './helpers.ts';

const dir = tempDir();
const hasOpenssl = spawnSync('openssl', ['version']).status === 0;
let server: Server | undefined;
let url = '';
const seen: Array<string | undefined> = [];

function selfSigned(name: string): { key: string; cert: string } {
  const key = join(dir, `${name}.key`);
  const cert = join(dir, `${name}.crt`);
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', `/CN=${name}`, '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  return { key: readFileSync(key, 'utf8'), cert: readFileSync(cert, 'utf8') };
}

function saDir(name: string, ca: string): string {
  const path = join(dir, name);
  mkdirSync(path, { recursive: true });
  writeFileSync(join(path, 'ca.crt'), ca);
  writeFileSync(join(path, 'token'), 'rotating-token-1\n');
  writeFileSync(join(path, 'namespace'), 'ci\n');
  return path;
}

before(async () => {
  if (!hasOpenssl) return;
  const tls = selfSigned('apiserver');
  server = createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    seen.push(req.headers.authorization);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'JobList', items: [] }));
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  writeFileSync(join(dir, 'apiserver.pem'), tls.cert);
});
after(async () => {
  if (server) await new Promise<void>((resolve) => server!.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});

describe('createKubeApi', () => {
  it('derives the API URL from KUBERNETES_SERVICE_HOST/PORT unless SVC_K8S_API_URL overrides it', () => {
    assert.equal(inClusterApiUrl({ KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '6443' }), 'https://10.0.0.1:6443');
    assert.equal(inClusterApiUrl({ KUBERNETES_SERVICE_HOST: 'fd00::1' }), 'https://[fd00::1]:443');
    assert.equal(inClusterApiUrl({ SVC_K8S_API_URL: 'http://127.0.0.1:8001/', KUBERNETES_SERVICE_HOST: 'x' }), 'http://127.0.0.1:8001');
    assert.equal(inClusterApiUrl({}), undefined);
  });

  it('reads the namespace and a fresh token from the service-account directory on every call', async (t) => {
    if (!hasOpenssl) return t.skip('openssl is not installed');
    const sa = saDir('sa-good', readFileSync(join(dir, 'apiserver.pem'), 'utf8'));
    const api = createKubeApi({ apiUrl: url, serviceAccountDir: sa });
    assert.equal(api.namespace, 'ci');
    assert.equal((await api.request('GET', '/apis/batch/v1/namespaces/ci/jobs')).status, 200);
    writeFileSync(join(sa, 'token'), 'rotating-token-2\n');
    await api.request('GET', '/apis/batch/v1/namespaces/ci/jobs');
    assert.deepEqual(seen.slice(-2), ['Bearer rotating-token-1', 'Bearer rotating-token-2']);
  });

  describe('security', () => {
    it('trusts only the cluster CA from ca.crt', async (t) => {
      if (!hasOpenssl) return t.skip('openssl is not installed');
      const other = selfSigned('impostor');
      const api = createKubeApi({ apiUrl: url, serviceAccountDir: saDir('sa-wrong-ca', other.cert) });
      await assert.rejects(api.request('GET', '/apis/batch/v1/namespaces/ci/jobs'), /self-signed|certificate/i);
    });
  });
});
