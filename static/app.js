// @ts-check
// The UI's entry module: registers the custom elements and maps the URL hash to one page element at a time.
// Pages own their data and streams; this file owns navigation, the token prompt and the footer.
import { getToken, setToken, onUnauthorized } from './lib/api.js';
import { parseHash } from './lib/route.js';
import { tokenAwareLink } from './lib/download.js';
import {
  onConnection, connectionLabel, connectionTitle, isStale, markReachable, markUnreachable,
} from './lib/connection.js';
import { clock, relative, hoverText } from './lib/time.js';
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

/**
 * @typedef {HTMLElement & {
 *   route?: import('./lib/route.js').Route, routeChanged?: (r: import('./lib/route.js').Route) => boolean,
 * }} PageElement
 */

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

let notReady = 0;

/** Asks /ready; while the server cannot be reached it asks again every 5 s, so the state recovers on its own. */
async function probeReady() {
  try {
    const response = await fetch('/ready', { cache: 'no-store' });
    notReady = response.ok ? 0 : response.status;
    markReachable();
  } catch {
    markUnreachable();
  }
}

/** Topbar, footer and stale banner, all from the one connection state (lib/connection.js). */
function wireConnection() {
  const conn = /** @type {HTMLElement} */ (document.getElementById('conn'));
  const info = /** @type {HTMLElement} */ (document.getElementById('server-info'));
  const banner = /** @type {HTMLElement} */ (document.getElementById('stale'));
  /** @type {ReturnType<typeof setInterval> | undefined} */
  let retry;
  /** @type {import('./lib/connection.js').Connection | null} */
  let last = null;
  const paint = () => {
    if (!last) return;
    const stale = isStale(last);
    conn.textContent = connectionLabel(last);
    conn.title = connectionTitle(last, location.host);
    conn.dataset.state = stale ? 'offline' : (last.stream ?? 'connected');
    info.textContent = stale
      ? `${location.host} cannot be reached`
      : notReady ? `${location.host} is not ready (${notReady})` : `Connected to ${location.host}`;
    document.body.classList.toggle('is-stale', stale);
    banner.hidden = !stale;
    if (stale) {
      const fresh = last.lastFresh;
      banner.textContent = fresh
        ? `The Control Plane cannot be reached: what you see was last fresh at ${clock(fresh)} (${relative(fresh)})` +
          ' and may be out of date. Reconnecting…'
        : 'The Control Plane cannot be reached: nothing has loaded yet. Reconnecting…';
      banner.title = fresh ? hoverText(fresh) : '';
    }
  };
  onConnection((c) => {
    last = c;
    paint();
    if (!c.reachable && !retry) retry = setInterval(() => void probeReady(), 5000);
    if (c.reachable && retry) {
      clearInterval(retry);
      retry = undefined;
    }
  });
  // "last fresh 12s ago" keeps counting while the banner is up.
  setInterval(() => {
    if (!banner.hidden) paint();
  }, 1000);
}

function wireMenu() {
  const button = /** @type {HTMLButtonElement} */ (document.getElementById('menu-button'));
  const nav = /** @type {HTMLElement} */ (document.getElementById('main-nav'));
  const set = (/** @type {boolean} */ open) => {
    button.setAttribute('aria-expanded', String(open));
    nav.classList.toggle('open', open);
  };
  button.addEventListener('click', () => set(button.getAttribute('aria-expanded') !== 'true'));
  nav.addEventListener('click', (event) => {
    if (event.target instanceof HTMLAnchorElement) set(false);
  });
  document.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && nav.classList.contains('open')) {
      set(false);
      button.focus();
    }
  });
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
  document.addEventListener('click', (event) =>
    tokenAwareLink(event, (err) => {
      const banner = /** @type {HTMLElement} */ (document.getElementById('stale'));
      banner.hidden = false;
      banner.textContent = `Download failed: ${/** @type {Error} */ (err).message}`;
    }),
  );
  document.querySelector('[data-skip]')?.addEventListener('click', (event) => {
    event.preventDefault();
    main.focus();
  });
}

window.addEventListener('hashchange', show);
wireFooter();
wireMenu();
wireConnection();
show();
void probeReady();
