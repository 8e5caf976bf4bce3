// The settings page's bundle upload: the file is sent as the request's body (never
// read into the page), with its progress shown, and the page is loaded again once
// RAUC has checked it. Without this script the page says how to upload otherwise.
"use strict";
(() => {
  const form = document.getElementById("bundle-upload");
  if (!form) return;
  const input = document.getElementById("bundle-file");
  const button = form.querySelector("button");
  const progress = document.getElementById("bundle-progress");
  const status = document.getElementById("bundle-status");
  const say = (text) => { status.textContent = text; };
  form.hidden = false;
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const file = input.files[0];
    if (!file) {
      say("Choose a bundle file first.");
      return;
    }
    const request = new XMLHttpRequest();
    request.open("POST", form.action);
    request.setRequestHeader("Content-Type", "application/octet-stream");
    request.upload.onprogress = (e) => {
      if (!e.lengthComputable) return;
      progress.max = e.total;
      progress.value = e.loaded;
      say(`Uploading: ${Math.floor((100 * e.loaded) / e.total)} %`);
    };
    request.upload.onload = () => say("Uploaded. RAUC is checking its signature and its version…");
    request.onload = () => {
      if (request.status === 201) {
        location.reload();
        return;
      }
      button.disabled = false;
      say(request.responseText || `The upload failed (${request.status}).`);
    };
    request.onerror = () => {
      button.disabled = false;
      say("The upload stopped: the box could not be reached.");
    };
    button.disabled = true;
    say("Uploading…");
    request.send(file);
  });
})();

// An install under way: its progress followed from the box, through the restart
// into the new system (the box does not answer meanwhile), until its outcome is known;
// then the page is loaded again and shows it.
(() => {
  const install = document.getElementById("install");
  if (!install) return;
  const step = document.getElementById("install-step");
  const bar = document.getElementById("install-progress");
  const titles = {
    requested: "Installation asked for",
    installing: "Installing",
    rebooting: "Installed; restarting into the new system",
    trial: "Trying the new system",
  };
  const title = install.querySelector("strong");
  let away = false;
  const poll = async () => {
    try {
      const response = await fetch("/console/system/update", {
        headers: { Accept: "application/json" },
        credentials: "same-origin",
        cache: "no-store",
      });
      const answer = response.ok ? await response.json() : null;
      if (!answer) throw new Error(`status ${response.status}`);
      if (!answer.install) {
        // Ended: committed, rolled back or failed; the page says which.
        location.reload();
        return;
      }
      const p = answer.install;
      title.textContent = titles[p.state] || p.state;
      if (p.step) step.textContent = p.step;
      if (typeof p.percent === "number") bar.value = p.percent;
      away = false;
    } catch (_) {
      if (!away) {
        away = true;
        step.textContent =
          "The box is restarting into the new system. This page goes on when it answers again.";
      }
    }
    setTimeout(poll, 2000);
  };
  setTimeout(poll, 2000);
})();
