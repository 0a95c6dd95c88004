/** The report panel's stylesheet: VS Code theme variables only, with fallbacks for a bare browser. */

/** The height of one rank row of the partition chart (its SVG rows and the label and value columns). */
export const PARTITION_ROW_PX = 24;

/**
 * The height of one module row of the layer divergence chart, and its text size: CSS pixels, the same
 * at any panel width (the chart's SVG has no viewBox that would scale them).
 */
export const MODULE_ROW_PX = 18;
export const MODULE_TEXT_PX = 11;

/**
 * The height of the per-atom |Δ| chart's plot and the size of its axis text: CSS pixels, the same at
 * any panel width (the plot's SVG has no viewBox; its marks are placed in percent, its text is HTML).
 */
export const ATOM_PLOT_PX = 180;
export const ATOM_TEXT_PX = 11;

export const STYLE = `
body { font-family: var(--vscode-font-family, sans-serif); font-size: var(--vscode-font-size, 13px); color: var(--vscode-foreground, #ccc); background: var(--vscode-editor-background, #1e1e1e); padding: 0 16px 24px; line-height: 1.45; }
h1 { font-size: 1.4em; margin: 14px 0 4px; font-weight: 600; }
h2 { font-size: 1.1em; margin: 20px 0 6px; border-bottom: 1px solid var(--vscode-panel-border, #444); padding-bottom: 2px; display: inline-block; }
h3 { font-size: 1em; margin: 10px 0 4px; }
summary h2 { border: none; margin: 12px 0 4px; }
code, pre { font-family: var(--vscode-editor-font-family, monospace); font-size: var(--vscode-editor-font-size, 12px); }
pre { background: var(--vscode-textCodeBlock-background, rgba(127,127,127,.1)); padding: 6px 8px; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
a { color: var(--vscode-textLink-foreground, #3794ff); text-decoration: none; cursor: pointer; }
a:hover { color: var(--vscode-textLink-activeForeground, #3794ff); text-decoration: underline; }
.badge { padding: 1px 8px; border-radius: 10px; font-size: .85em; vertical-align: middle; }
.badge.passed { background: var(--vscode-testing-iconPassed, #73c991); color: var(--vscode-editor-background, #1e1e1e); }
.badge.failed, .badge.error { background: var(--vscode-testing-iconFailed, #f14c4c); color: var(--vscode-editor-background, #1e1e1e); }
.badge.passed_after_fix, .badge.stale { background: var(--vscode-editorWarning-foreground, #cca700); color: var(--vscode-editor-background, #1e1e1e); }
.badge.cancelled { background: var(--vscode-descriptionForeground, #999); color: var(--vscode-editor-background, #1e1e1e); }
.badge.inconclusive { background: var(--vscode-editorWarning-foreground, #cca700); color: var(--vscode-editor-background, #1e1e1e); }
.headline { font-weight: 600; margin: 6px 0; }
.next-action { margin: 4px 0 8px; padding-left: 18px; }
.meta, .dim, .spec-uri { color: var(--vscode-descriptionForeground, #999); }
.notice { color: var(--vscode-editorInfo-foreground, #3794ff); }
.fix { color: var(--vscode-testing-iconPassed, #73c991); }
.actions { display: flex; gap: 8px; margin: 10px 0; flex-wrap: wrap; }
button { background: var(--vscode-button-background, #0e639c); color: var(--vscode-button-foreground, #fff); border: 1px solid var(--vscode-button-border, transparent); padding: 4px 12px; cursor: pointer; font-family: inherit; border-radius: 2px; }
button:hover { background: var(--vscode-button-hoverBackground, #1177bb); }
button:disabled { opacity: .5; cursor: not-allowed; }
button + button { background: var(--vscode-button-secondaryBackground, #3a3d41); color: var(--vscode-button-secondaryForeground, #fff); }
table { border-collapse: collapse; margin: 4px 0 8px; }
th, td { text-align: left; padding: 3px 10px 3px 0; vertical-align: top; border-bottom: 1px solid var(--vscode-editorWidget-border, #333); }
th { color: var(--vscode-descriptionForeground, #999); font-weight: normal; }
td.result.pass, tr.pass td.result { color: var(--vscode-testing-iconPassed, #73c991); }
td.result.fail, td.result.error, tr.fail td.result { color: var(--vscode-testing-iconFailed, #f14c4c); }
ul.handlers { margin: 0; padding-left: 0; list-style: none; }
svg.chart { display: block; max-width: 100%; height: auto; }
.chart text { fill: var(--vscode-foreground, #ccc); font-size: 11px; font-family: var(--vscode-font-family, sans-serif); }
.chart text.axis { fill: var(--vscode-descriptionForeground, #999); font-size: 10px; }
.chart text.value.bad { fill: var(--vscode-testing-iconFailed, #f14c4c); }
.chart .grid { stroke: var(--vscode-editorWidget-border, #444); stroke-width: 1; stroke-dasharray: 2 3; }
.chart .bar.ok { fill: var(--vscode-testing-iconPassed, #73c991); }
.chart .bar.bad { fill: var(--vscode-testing-iconFailed, #f14c4c); }
.chart .tol { stroke: var(--vscode-editorWarning-foreground, #cca700); stroke-width: 2; }
.partition-grid { display: grid; grid-template-columns: max-content minmax(120px, 1fr) max-content; column-gap: 8px; margin: 4px 0; }
.partition-row { height: ${PARTITION_ROW_PX}px; line-height: ${PARTITION_ROW_PX}px; white-space: nowrap; }
.partition-labels { text-align: right; }
.partition-values { color: var(--vscode-descriptionForeground, #999); font-size: .92em; }
svg.partition-chart { display: block; width: 100%; }
.partition-chart .seg.owned { fill: var(--vscode-charts-blue, #3794ff); }
.partition-chart .seg.halo { fill: var(--vscode-charts-orange, #d18616); }
.partition-chart .seg.remote { fill: var(--vscode-charts-lines, #888); opacity: .6; }
.module-grid { display: grid; grid-template-columns: minmax(0, max-content) minmax(120px, 1fr) max-content; column-gap: 8px; margin: 4px 0; }
.module-row { height: ${MODULE_ROW_PX}px; line-height: ${MODULE_ROW_PX}px; font-size: ${MODULE_TEXT_PX}px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.module-labels { text-align: right; max-width: 28em; }
.module-values { color: var(--vscode-descriptionForeground, #999); }
svg.module-bars { display: block; width: 100%; }
.atom-grid { display: grid; grid-template-columns: max-content minmax(160px, 1fr); column-gap: 6px; margin: 4px 0; }
.atom-y { display: flex; flex-direction: column; justify-content: space-between; height: ${ATOM_PLOT_PX}px; text-align: right; }
.atom-x { display: flex; justify-content: space-between; gap: 8px; }
.atom-tick { font-size: ${ATOM_TEXT_PX}px; line-height: ${ATOM_TEXT_PX + 3}px; color: var(--vscode-descriptionForeground, #999); white-space: nowrap; }
.atom-axis { font-size: ${ATOM_TEXT_PX}px; line-height: ${ATOM_TEXT_PX + 3}px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
.atom-legend { list-style: none; margin: 4px 0 0; padding: 0; display: flex; flex-wrap: wrap; gap: 2px 14px; font-size: ${ATOM_TEXT_PX}px; line-height: ${ATOM_TEXT_PX + 3}px; }
.atom-legend svg.swatch { display: inline-block; vertical-align: baseline; }
svg.atom-plot { display: block; width: 100%; overflow: visible; border-left: 1px solid var(--vscode-foreground, #ccc); border-bottom: 1px solid var(--vscode-foreground, #ccc); }
.legend { font-size: .9em; color: var(--vscode-descriptionForeground, #999); }
.sw { display: inline-block; width: 10px; height: 10px; margin: 0 3px 0 10px; vertical-align: middle; }
.sw.ok { background: var(--vscode-testing-iconPassed, #73c991); }
.sw.bad { background: var(--vscode-testing-iconFailed, #f14c4c); }
.sw.tolmark { background: var(--vscode-editorWarning-foreground, #cca700); width: 3px; }
.sw.owned { background: var(--vscode-charts-blue, #3794ff); }
.sw.halo { background: var(--vscode-charts-orange, #d18616); }
.sw.remote { background: var(--vscode-charts-lines, #888); opacity: .6; }
.helper, .worker-error { border-left: 3px solid var(--vscode-editorWidget-border, #444); padding: 2px 0 6px 10px; margin: 8px 0; }
.helper.flagged, .worker-error { border-left-color: var(--vscode-editorWarning-foreground, #cca700); }
.helper ul { margin: 2px 0; padding-left: 18px; }
.tag { font-size: .8em; padding: 0 6px; border-radius: 8px; border: 1px solid var(--vscode-editorWidget-border, #444); }
.tag.ok { color: var(--vscode-testing-iconPassed, #73c991); }
.tag.bad { color: var(--vscode-testing-iconFailed, #f14c4c); }
.gap, .warning { color: var(--vscode-editorWarning-foreground, #cca700); }
.worker-error .message { font-family: var(--vscode-editor-font-family, monospace); color: var(--vscode-errorForeground, #f48771); }
.hint { background: var(--vscode-textBlockQuote-background, rgba(127,127,127,.1)); border-left: 3px solid var(--vscode-textBlockQuote-border, #555); padding: 4px 8px; }
ol.frames { padding-left: 22px; font-family: var(--vscode-editor-font-family, monospace); font-size: .92em; }
ol.frames li.lib { opacity: .6; }
ol.frames li.user { font-weight: 600; }
.empty { margin-top: 40px; }
.report-error { color: var(--vscode-errorForeground, #f48771); border-left: 3px solid var(--vscode-errorForeground, #f48771); padding: 2px 8px; margin: 4px 0; }
`;
