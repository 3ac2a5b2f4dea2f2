// The request form: current values of the chosen line, only the chosen team's namespaces,
// added lines, dates of temporary grants, and the server's check as one types. Loaded from a
// file: the CSP allows no inline script.
//
// The check holds no rule: the form is posted as it stands to the server's check (the same
// forms and services a submit runs, nothing saved), and the answers are placed next to the
// fields they name, with the server's own words.
(function () {
  const form = document.getElementById("request-form");
  const data = JSON.parse(document.getElementById("current-values").textContent);
  const rows = document.getElementById("line-rows");
  const total = document.getElementById("id_lines-TOTAL_FORMS");
  const team = document.getElementById("id_team");

  // "(pod ≤ %(max)s)" in the page's language, as the server writes the cell before this runs.
  function podMax(value) {
    return (form.dataset.textPodMax || "(≤ %(max)s)").replace("%(max)s", value);
  }

  // fillValues: false for a form the server sent back, whose fields hold what was typed.
  function refresh(row, fillValues = true) {
    const ns = row.querySelector("select[name$='-team_namespace']");
    const res = row.querySelector("select[name$='-resource']");
    const cell = row.querySelector("[data-current]");
    const info = data.namespaces[ns.value];
    // Only the resources with capacity on the namespace's cluster can be chosen.
    for (const option of res.options) {
      option.disabled = Boolean(info && option.value && !info.resources.includes(Number(option.value)));
    }
    const current = (data.current[ns.value] || {})[res.value];
    if (!ns.value || !res.value) { cell.textContent = "–"; return; }
    if (!current) { cell.textContent = cell.dataset.none || "–"; return; }
    cell.textContent = current.guarantee + " / " + current.cap +
      (current.per_pod_max ? " " + podMax(current.per_pod_max) : "") +
      (current.priority_classes.length ? " [" + current.priority_classes.join(", ") + "]" : "");
    if (!fillValues) return;
    // Fill in the current values (an empty field keeps its value anyway); values filled in
    // for an earlier choice of namespace or resource follow the new choice.
    const fill = (suffix, value) => {
      const input = row.querySelector("input[name$='-" + suffix + "']");
      if (!input || (input.value !== "" && input.value !== input.dataset.filled)) return;
      input.value = value === null ? "" : value;
      input.dataset.filled = input.value;
    };
    fill("guarantee", current.guarantee);
    fill("cap", current.cap);
    const ticked = (suffix) => {
      const box = row.querySelector("input[name$='-" + suffix + "']");
      return Boolean(box && box.checked);
    };
    if (!ticked("remove_per_pod_max")) fill("per_pod_max", current.per_pod_max);
    const classes = row.querySelector("select[name$='-priority_classes']");
    const untouched = classes && (classes.selectedOptions.length === 0 || classes.dataset.filled);
    if (untouched && !ticked("any_priority_class")) {
      for (const option of classes.options) {
        option.selected = current.priority_classes.includes(option.value);
      }
      classes.dataset.filled = "1";
    }
  }

  function filterNamespaces() {
    // Namespaces are grouped by team slug; hide the groups of other teams.
    const chosen = team && team.selectedOptions.length ? team.value : "";
    for (const select of rows.querySelectorAll("select[name$='-team_namespace']")) {
      for (const option of select.querySelectorAll("option[value]")) {
        const info = data.namespaces[option.value];
        if (!info) continue;
        option.hidden = Boolean(chosen) && String(info.team) !== chosen;
      }
    }
  }

  // --- the server's check ------------------------------------------------------------------

  const impact = document.getElementById("impact");
  const pageMessages = document.getElementById("form-messages");
  const status = document.getElementById("check-status");
  const touched = new Set();
  // After a submit came back, or the Check button: every answer shows, "required" ones too.
  let everything = form.dataset.bound === "1";
  let timer = null;
  let controller = null;
  let sequence = 0;

  function shown(name, error) {
    // A field the user has not reached yet is not blamed for being empty.
    return error.code !== "required" || everything || touched.has(name);
  }

  function elementFor(answer) {
    const byId = document.getElementById(answer.id);
    if (byId) return byId;
    const named = form.elements.namedItem(answer.name);
    return named instanceof RadioNodeList ? named[0] : named;
  }

  function describe(element, ids) {
    if (ids.length) element.setAttribute("aria-describedby", ids.join(" "));
    else element.removeAttribute("aria-describedby");
  }

  // The same markup as the server's (approvals/_field_messages.html), so that an answer placed
  // here reads (and is found) as the one a sent-back form shows.
  function box(className, id, texts, textClass, testid) {
    const div = document.createElement("div");
    div.className = className;
    div.id = id;
    for (const text of texts) {
      const p = document.createElement("p");
      p.className = textClass;
      if (testid) p.dataset.testid = testid;
      p.textContent = text;
      div.appendChild(p);
    }
    return div;
  }

  function clearAnswers() {
    for (const el of form.querySelectorAll(".field-errors, .field-warnings")) el.remove();
    for (const el of form.querySelectorAll(".has-error")) el.classList.remove("has-error");
    for (const el of form.querySelectorAll("[aria-invalid]")) el.removeAttribute("aria-invalid");
    for (const el of form.querySelectorAll("[aria-describedby]")) {
      const help = document.getElementById(el.id + "_helptext");
      describe(el, help ? [help.id] : []);
    }
  }

  function placeAnswer(answer) {
    const element = elementFor(answer);
    if (!element) return false;
    const errors = answer.errors.filter((e) => shown(answer.name, e)).map((e) => e.message);
    const holder = element.closest("td, fieldset, .field") || element.parentElement;
    const id = element.id || answer.id;
    const help = document.getElementById(id + "_helptext");
    const ids = help ? [help.id] : [];
    if (errors.length) {
      const found = box("field-errors", id + "_error", errors, "error", "error-" + answer.name);
      holder.appendChild(found);
      holder.classList.add("has-error");
      element.setAttribute("aria-invalid", "true");
      ids.push(found.id);
    }
    if (answer.warnings.length) {
      const found = box("field-warnings", id + "_warning", answer.warnings, "warning");
      holder.appendChild(found);
      ids.push(found.id);
    }
    describe(element, ids);
    return true;
  }

  function showMessages(list) {
    pageMessages.replaceChildren();
    for (const m of list) {
      const p = document.createElement("p");
      p.className = m.level === "warning" ? "warning" : "error";
      p.textContent = m.message;
      pageMessages.appendChild(p);
    }
    pageMessages.classList.toggle("hidden", list.length === 0);
  }

  function showImpact(html) {
    // Rendered (and escaped) by the server's template: the impact of what the form holds, or
    // why there is none yet; never the impact of values no longer in the form.
    impact.innerHTML = html;
  }

  function apply(answer) {
    clearAnswers();
    const loose = [...answer.messages];
    for (const field of answer.fields) {
      if (!placeAnswer(field)) {
        for (const e of field.errors) loose.push({message: e.message, level: "error"});
      }
    }
    showMessages(loose.filter((m) => m.code !== "required" || everything));
    showImpact(answer.impact_html);
  }

  async function check(withClusters) {
    const mine = ++sequence;
    if (controller) controller.abort();
    controller = new AbortController();
    const body = new FormData(form);
    body.delete("action");
    if (withClusters) body.set("clusters", "1");
    status.textContent = form.dataset.textChecking;
    impact.setAttribute("aria-busy", "true");  // until the newest check's answer is in place
    try {
      const response = await fetch(form.dataset.validateUrl, {
        method: "POST",
        body: body,
        credentials: "same-origin",
        headers: {"Accept": "application/json"},
        signal: controller.signal,
      });
      const answer = await response.json();
      if (mine !== sequence) return;
      status.textContent = "";
      if (!response.ok) {
        showMessages([{message: answer.message || form.dataset.textFailed, level: "error"}]);
        return;
      }
      apply(answer);
    } catch (err) {
      if (err.name !== "AbortError" && mine === sequence) status.textContent = form.dataset.textFailed;
    } finally {
      if (mine === sequence) impact.removeAttribute("aria-busy");
    }
  }

  function later() {
    clearTimeout(timer);
    timer = setTimeout(() => check(false), 400);
  }

  function filledLine() {
    return Array.from(rows.querySelectorAll("tr.line-row")).some((row) => {
      const ns = row.querySelector("select[name$='-team_namespace']");
      const res = row.querySelector("select[name$='-resource']");
      return ns && res && ns.value && res.value;
    });
  }

  // --- wiring --------------------------------------------------------------------------------

  rows.addEventListener("change", (event) => {
    const row = event.target.closest("tr.line-row");
    if (!row) return;
    if (event.target.matches("select[name$='-priority_classes']")) {
      delete event.target.dataset.filled;  // the user's own choice from now on
      return;
    }
    if (event.target.matches("select[name$='-team_namespace'], select[name$='-resource']")) {
      refresh(row);
    }
  });
  for (const type of ["input", "change"]) {
    form.addEventListener(type, (event) => {
      if (!event.target.name || event.target.name === "csrfmiddlewaretoken") return;
      touched.add(event.target.name);
      later();
    });
  }
  form.querySelector("button[value=check]").addEventListener("click", (event) => {
    event.preventDefault();  // without this script the button asks the page for the same
    everything = true;
    clearTimeout(timer);
    check(true);
  });
  document.getElementById("add-line").addEventListener("click", () => {
    const index = Number(total.value);
    const html = document.getElementById("line-template").innerHTML.replaceAll("__prefix__", index);
    rows.insertAdjacentHTML("beforeend", html);
    total.value = index + 1;
    filterNamespaces();
  });
  if (team) team.addEventListener("change", filterNamespaces);

  const kinds = document.querySelectorAll("input[name='kind']");
  function toggleDates() {
    const temporary = Array.from(kinds).some((k) => k.checked && k.value === "temporary");
    for (const el of document.querySelectorAll(".temporary-only")) {
      el.classList.toggle("dim", !temporary);
    }
  }
  for (const k of kinds) k.addEventListener("change", toggleDates);
  toggleDates();
  filterNamespaces();
  for (const row of rows.querySelectorAll("tr.line-row")) refresh(row, form.dataset.bound !== "1");
  if (filledLine()) check(false);  // an edited request (or a form sent back): its impact now
})();
