// SVG charts of a bench run, one per workload, written beside its markdown: one panel per figure,
// one horizontal bar per router, so the peers (and the central path's three routes, gate-mux,
// gate-mux-local-tunnel and gate-mux-peered, in the rate workload) are seen side by side. Plain
// SVG with no script or external font, so it renders the same in a browser, on GitHub and in a
// headless screenshot.

export interface ChartPanel {
  title: string;
  /** Whether a shorter bar is better, said under the title. */
  better: 'lower' | 'higher';
  /** [router, value]; routers without a value are left out. */
  bars: Array<[string, number | undefined]>;
  digits: number;
}

const WIDTH = 720;
const LABEL = 190;
const BAR_HEIGHT = 18;
const GAP = 6;
const PANEL_HEAD = 40;
const PANEL_GAP = 18;
const VALUE_ROOM = 80;

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

function format(value: number, digits: number): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** One SVG document: `title`, then the panels one below the other. */
export function chartSvg(title: string, subtitle: string, panels: ChartPanel[]): string {
  const shown = panels
    .map((p) => ({ ...p, bars: p.bars.filter((b): b is [string, number] => b[1] !== undefined && Number.isFinite(b[1])) }))
    .filter((p) => p.bars.length > 0);
  const parts: string[] = [];
  let y = 56;
  for (const panel of shown) {
    const max = Math.max(...panel.bars.map(([, v]) => v), 1e-9);
    parts.push(`<text x="16" y="${y + 16}" font-size="14" font-weight="bold">${escapeXml(panel.title)}</text>`);
    parts.push(`<text x="16" y="${y + 32}" font-size="11" fill="#555">${panel.better} is better</text>`);
    let by = y + PANEL_HEAD;
    for (const [router, value] of panel.bars) {
      const width = Math.max(1, ((WIDTH - LABEL - VALUE_ROOM - 16) * value) / max);
      const colour = router.startsWith('gate-mux') ? '#2b6cb0' : '#a0aec0';
      parts.push(`<text x="${LABEL - 8}" y="${by + 13}" font-size="12" text-anchor="end">${escapeXml(router)}</text>`);
      parts.push(`<rect x="${LABEL}" y="${by}" width="${width.toFixed(1)}" height="${BAR_HEIGHT}" fill="${colour}"/>`);
      parts.push(`<text x="${(LABEL + width + 6).toFixed(1)}" y="${by + 13}" font-size="12">${format(value, panel.digits)}</text>`);
      by += BAR_HEIGHT + GAP;
    }
    y = by + PANEL_GAP;
  }
  const height = y + 8;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif">`,
    `<rect width="${WIDTH}" height="${height}" fill="#fff"/>`,
    `<text x="16" y="24" font-size="16" font-weight="bold">${escapeXml(title)}</text>`,
    `<text x="16" y="42" font-size="11" fill="#555">${escapeXml(subtitle)}</text>`,
    ...parts,
    '</svg>',
    '',
  ].join('\n');
}
