// @ts-check
// The topbar's live indicator: pages report their stream state here so the person always sees if updates flow.

const TEXT = /** @type {Record<string, string>} */ ({
  connecting: 'Connecting…',
  live: 'Live',
  reconnecting: 'Reconnecting…',
  closed: '',
});

/** @param {import('./sse.js').StreamState} state */
export function showStreamState(state) {
  const el = document.getElementById('conn');
  if (!el) return;
  el.textContent = TEXT[state] ?? '';
  el.dataset.state = state;
}
