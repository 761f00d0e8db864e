// The browser benchmark's probe (benchmarks/browser.py), evaluated with one slider and its cell.
//
// Records into window.__feel, in the page's milliseconds (performance.now()):
//   inputs: every key down, mouse down and mouse up in the page;
//   frames: every picture ipympl draws onto a figure's canvas (.ppo-figure) in the cell, with
//     shown: whether the page painted it (one replaced before the next animation frame never was);
//   values: every change of the slider's readout (the value shown next to it).
// Evaluating it again (the next notebook) starts afresh; window.__feel.reset() empties the lists.
({cell, control}) => {
  const feel = (window.__feel = {cell, inputs: [], frames: [], values: []});
  feel.reset = () => {
    feel.inputs = [];
    feel.frames = [];
    feel.values = [];
  };
  if (!window.__feelHooked) {
    window.__feelHooked = true;
    for (const type of ["keydown", "mousedown", "mouseup"]) {
      const record = () => window.__feel.inputs.push({type, t: performance.now()});
      window.addEventListener(type, record, true);
    }
    // ipympl draws each PNG onto an offscreen canvas, then that onto each view's canvas.
    const drawImage = CanvasRenderingContext2D.prototype.drawImage;
    const latest = new Map(); // canvas -> its latest frame
    CanvasRenderingContext2D.prototype.drawImage = function (picture, ...rest) {
      const canvas = this.canvas;
      const now = window.__feel;
      if (canvas.isConnected && now.cell.contains(canvas) && canvas.closest(".ppo-figure")) {
        const frame = {t: performance.now(), shown: false};
        now.frames.push(frame);
        latest.set(canvas, frame);
        requestAnimationFrame(() => {
          frame.shown = latest.get(canvas) === frame;
        });
      }
      return drawImage.call(this, picture, ...rest);
    };
  }
  if (window.__feelObserver) window.__feelObserver.disconnect();
  const readout = control.querySelector(".widget-readout");
  window.__feelObserver = new MutationObserver(() => {
    feel.values.push({t: performance.now(), value: readout.textContent});
  });
  if (readout) {
    window.__feelObserver.observe(readout, {subtree: true, childList: true, characterData: true});
  }
};
