// @ts-check
// The UI's entry module: registers the custom elements and maps the URL hash to one page element at a time.
// Pages own their data and streams; this file owns navigation, the token prompt and the footer.
import { getToken, setToken, onUnauthorized } from './lib/api.js';
import { parseHash } from './lib/route.js';
import { tokenAwareLink } from './lib/download.js';
import { registerTokenDialog } from './components/token-dialog.js';
import { registerConfirm } from './components/confirm-dialog.js';
import { registerRunsPage } from './components/runs-page.js';
import { registerRunDetail } from './components/run-detail.js';
import { registerStartPage } from './components/start-page.js';
import { registerStatsPage } from './components/stats-page.js';
import { registerMergePage } from './components/merge-page.js';
import { registerAuditPage } from './components/audit-page.js';
import { registerConfigPage } from './components/config-page.js';
import { registerProvidersPage } from './components/providers-page.js';
import { registerIntegrationsPage } from './components/integrations-page.js';
import { registerNotificationsPage } from './components/notifications-page.js';

registerTokenDialog();
registerConfirm();
registerRunsPage();
registerRunDetail();
registerStartPage();
registerStatsPage();
registerMergePage();
registerAuditPage();
registerConfigPage();
registerProvidersPage();
registerIntegrationsPage();
registerNotificationsPage();

/** @type {Record<string, {tag: string, title: string}>} */
const PAGES = {
  runs: { tag: 'svc-runs-page', title: 'Runs' },
  start: { tag: 'svc-start-page', title: 'Start a run' },
  stats: { tag: 'svc-stats-page', title: 'Stats & cost' },
  merge: { tag: 'svc-merge-page', title: 'Merge queue' },
  audit: { tag: 'svc-audit-page', title: 'Audit log' },
  config: { tag: 'svc-config-page', title: 'Config' },
  providers: { tag: 'svc-providers-page', title: 'Providers' },
  integrations: { tag: 'svc-integrations-page', title: 'Integrations' },
  notifications: { tag: 'svc-notifications-page', title: 'Notifications' },
};

const main = /** @type {HTMLElement} */ (document.getElementById('main'));
const tokenDialog = /** @type {any} */ (document.querySelector('svc-token-dialog'));

onUnauthorized((rejected) => tokenDialog.ask(rejected));

/** @typedef {HTMLElement & { route?: import('./lib/route.js').Route, routeChanged?: (r: import('./lib/route.js').Route) => boolean }} PageElement */

function show() {
  if (!location.hash.startsWith('#/') && location.hash !== '') return;
  const route = parseHash(location.hash);
  const [first = 'runs', ...rest] = route.segments;
  const isDetail = first === 'runs' && rest.length === 2;
  const page = isDetail ? { tag: 'svc-run-detail', title: `Run ${rest[1]}` } : PAGES[first];
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.getAttribute('data-nav') === first) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (!page) {
    const p = document.createElement('p');
    p.className = 'state state-empty';
    p.textContent = `There is no page at ${route.path}.`;
    main.replaceChildren(p);
    document.title = 'Not found · svc';
    return;
  }
  document.title = `${page.title} · svc`;
  const current = /** @type {PageElement | null} */ (main.firstElementChild);
  // A page that can follow a query change in place (filters, paging) keeps its live stream.
  if (current && current.localName === page.tag && current.routeChanged?.(route)) return;
  const element = /** @type {PageElement} */ (document.createElement(page.tag));
  element.route = route;
  main.replaceChildren(element);
}

async function showServerInfo() {
  const info = /** @type {HTMLElement} */ (document.getElementById('server-info'));
  try {
    const response = await fetch('/ready', { cache: 'no-store' });
    info.textContent = response.ok ? `Connected to ${location.host}` : `${location.host} is not ready (${response.status})`;
  } catch {
    info.textContent = `${location.host} cannot be reached`;
  }
}

function wireFooter() {
  const forget = /** @type {HTMLButtonElement} */ (document.getElementById('forget-token'));
  const refresh = () => {
    forget.hidden = getToken() === '';
  };
  refresh();
  window.addEventListener('svc:token', refresh);
  forget.addEventListener('click', () => {
    setToken('');
    window.dispatchEvent(new Event('svc:token'));
    location.reload();
  });
  const info = /** @type {HTMLElement} */ (document.getElementById('server-info'));
  document.addEventListener('click', (event) =>
    tokenAwareLink(event, (err) => {
      info.textContent = `Download failed: ${/** @type {Error} */ (err).message}`;
    }),
  );
  document.querySelector('[data-skip]')?.addEventListener('click', (event) => {
    event.preventDefault();
    main.focus();
  });
}

window.addEventListener('hashchange', show);
wireFooter();
show();
void showServerInfo();
