// The UI's escaping template (static/lib/html.js) and its SSE parser (the SDK's, src/client/sse-parse.ts, which the
// Control Plane serves to the UI) run in Node: the browser is not needed to prove them.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import * as sse from '../../src/client/sse-parse.ts';

interface Safe {
  markup: string;
}
interface HtmlModule {
  html(strings: TemplateStringsArray, ...values: unknown[]): Safe;
  escapeHtml(value: unknown): string;
  safeUrl(value: unknown): string;
  render(target: { innerHTML: string }, content: unknown): void;
  SafeHtml: new (markup: string) => Safe;
}

// Imported by URL so the test type-checks without allowJs; the module is plain browser JS.
const lib: HtmlModule = await import(new URL('../../static/lib/html.js', import.meta.url).href);
const { html } = lib;

describe('html template', () => {
  it('escapes every HTML-significant character in text', () => {
    assert.equal(html`<p>${`<script>alert("x")</script> & 'y' \`z\``}</p>`.markup, '<p>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39; &#96;z&#96;</p>');
  });

  it('escapes quotes inside attribute values so data cannot open a new attribute', () => {
    assert.equal(html`<a title="${'x" onmouseover="alert(1)'}">t</a>`.markup, '<a title="x&quot; onmouseover=&quot;alert(1)">t</a>');
  });

  it('keeps nested template output as markup and joins arrays of it', () => {
    const rows = ['a', '<b>'].map((v) => html`<li>${v}</li>`);
    assert.equal(html`<ul>${rows}</ul>`.markup, '<ul><li>a</li><li>&lt;b&gt;</li></ul>');
  });

  it('renders null, undefined and false as nothing but keeps 0', () => {
    assert.equal(html`[${null}${undefined}${false}${0}]`.markup, '[0]');
  });

  it('does not trust objects that merely look like template output', () => {
    const fake = { markup: '<img src=x onerror=alert(1)>', toString: () => '<img src=x onerror=alert(1)>' };
    assert.equal(html`<p>${fake}</p>`.markup, '<p>&lt;img src=x onerror=alert(1)&gt;</p>');
  });

  it('neutralises javascript: and data: URLs in href and src but keeps http(s) and relative links', () => {
    assert.equal(html`<a href="${'javascript:alert(1)'}">x</a>`.markup, '<a href="#">x</a>');
    assert.equal(html`<a href="${' JaVa\tScRipt:alert(1)'}">x</a>`.markup, '<a href="#">x</a>');
    assert.equal(html`<img src="${'data:text/html,<script>'}">`.markup, '<img src="#">');
    assert.equal(html`<a href="${'https://example.test/a?b=1&c=2'}">x</a>`.markup, '<a href="https://example.test/a?b=1&amp;c=2">x</a>');
    assert.equal(html`<a href="${'#/runs/local/r1'}">x</a>`.markup, '<a href="#/runs/local/r1">x</a>');
  });

  it('leaves URL-looking text outside attributes alone (it is escaped, not rewritten)', () => {
    assert.equal(html`<p>${'javascript:alert(1)'}</p>`.markup, '<p>javascript:alert(1)</p>');
  });

  it('refuses an unquoted attribute value, which escaping alone cannot make safe', () => {
    assert.throws(() => html`<td colspan=${'2 onclick=alert(1)'}>x</td>`, /quote attribute values/);
  });

  it('does not mistake an equals sign in text for an attribute', () => {
    assert.equal(html`<p>total = ${3}</p>`.markup, '<p>total = 3</p>');
  });

  it('render() accepts only template output', () => {
    const target = { innerHTML: '' };
    lib.render(target, html`<b>${'<i>'}</b>`);
    assert.equal(target.innerHTML, '<b>&lt;i&gt;</b>');
    assert.throws(() => lib.render(target, '<img src=x onerror=alert(1)>'), TypeError);
  });
});

describe('SSE parser', () => {
  it('parses id, event and multi-line data across arbitrary chunk boundaries', () => {
    const p = sse.createSseParser();
    const text = 'retry: 2000\n\n: ping\n\nid: 7\nevent: log\ndata: {"a":\ndata: 1}\n\nid: 8\r\nevent: run.status\r\ndata: x\r\n\r\n';
    const out = [];
    for (const ch of text) out.push(...p.push(ch));
    assert.deepEqual(out, [
      { id: '7', event: 'log', data: '{"a":\n1}' },
      { id: '8', event: 'run.status', data: 'x' },
    ]);
    assert.equal(p.retryMs(), 2000);
  });

  it('keeps the last id for events that carry none and defaults the event name to message', () => {
    const p = sse.createSseParser();
    assert.deepEqual(p.push('id: 3\ndata: a\n\ndata: b\n\n'), [
      { id: '3', event: 'message', data: 'a' },
      { id: '3', event: 'message', data: 'b' },
    ]);
  });

  it('holds back an incomplete event until its blank line arrives', () => {
    const p = sse.createSseParser();
    assert.deepEqual(p.push('id: 1\ndata: a\n'), []);
    assert.deepEqual(p.push('\n'), [{ id: '1', event: 'message', data: 'a' }]);
  });
});
