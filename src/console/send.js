// The Send page's camera: where the browser can read QR codes itself (the
// BarcodeDetector API, on phones and some desktops), a button opens the camera and
// fills "Pay to" with the first code it sees. Nothing is loaded from elsewhere; where
// the browser cannot, the button stays hidden and the field takes a paste.
"use strict";
(() => {
  const box = document.getElementById("scan");
  const field = document.getElementById("destination");
  if (!box || !field || !("BarcodeDetector" in window) || !navigator.mediaDevices) return;
  const start = document.getElementById("scan-start");
  const video = document.getElementById("scan-video");
  box.hidden = false;
  let stream = null;
  const stop = () => {
    if (stream) stream.getTracks().forEach((t) => t.stop());
    stream = null;
    video.hidden = true;
    start.textContent = "Scan a QR code";
  };
  start.addEventListener("click", async () => {
    if (stream) return stop();
    try {
      const detector = new BarcodeDetector({ formats: ["qr_code"] });
      stream = await navigator.mediaDevices.getUserMedia({ video: { facingMode: "environment" } });
      video.srcObject = stream;
      video.hidden = false;
      start.textContent = "Stop the camera";
      await video.play();
      const look = async () => {
        if (!stream) return;
        const codes = await detector.detect(video).catch(() => []);
        if (codes.length > 0) {
          field.value = codes[0].rawValue;
          stop();
          field.focus();
          return;
        }
        setTimeout(look, 250);
      };
      look();
    } catch (e) {
      stop();
      start.textContent = "No camera: paste instead";
    }
  });
})();
