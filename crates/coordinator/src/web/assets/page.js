// The page's figures and forms: polls /stats/requests and /stats/history
// every second, fills the tables, the verdict and the server-side block,
// and posts the start form, the Edit form and Stop. Charts: charts.js.
(function(){
'use strict';
var $=function(id){return document.getElementById(id);};
var points=[], marks=[], nextPoint=0, polls=0, lastState='', editShown=false, shownLoad='';
var charts=window.cicadaCharts, fmt=charts.fmt;

function cell(tr,text,left){var td=document.createElement('td');td.textContent=text;if(left){td.className='l';}tr.appendChild(td);}
function fill(id,rows){var body=document.querySelector('#'+id+' tbody');body.textContent='';rows.forEach(function(r){var tr=document.createElement('tr');r.forEach(function(c,i){cell(tr,c,i===0||(typeof c==='string'&&isNaN(Number(c))&&id!=='stats-table'));});body.appendChild(tr);});}
function drawCharts(){charts.draw(points,marks);}

function getJSON(url){return fetch(url,{credentials:'same-origin',cache:'no-store'}).then(function(r){if(!r.ok){throw new Error(url+': HTTP '+r.status);}return r.json();});}

// is the client the limit? (the run's verdict so far)
function showVerdict(v){
  var box=$('verdict');box.hidden=!v;if(!v){return;}
  box.classList.toggle('bound',v.client_bound);box.setAttribute('data-bound',String(v.client_bound));
  box.textContent=v.client_bound?'Client-bound: the client, not the server, limited the run: '+v.reasons.join('; ')
    :'Not client-bound: the workers kept up (runtime stall p99 '+fmt(v.stall_p99_ms)+' ms, max '+fmt(v.stall_max_ms)+' ms)';
}
function showServer(s){
  $('server').hidden=!s;if(!s){return;}
  $('server-of').textContent=s.of;fill('server-table',s.rows);
}
// the Edit form: users and spawn rate for a closed loop, rate and cap for an
// open one, as in force now (refilled when the load changes, unless being edited)
function showEdit(s,c){
  var sc=c.scenario,ld=c.load,editable=s.state==='running',f=$('steer');
  var key=JSON.stringify(ld),typing=f.contains(document.activeElement);
  if(editable&&(!editShown||(key!==shownLoad&&!typing))){
    f.user_count.value=ld.users||'';f.spawn_rate.value=ld.spawn_rate||'';
    f.rate.value=ld.rate||'';f.max_concurrency.value=ld.max_concurrency||'';shownLoad=key;
  }
  $('steer-closed').hidden=$('steer-closed').disabled=!sc.closed_loop;
  $('steer-open').hidden=$('steer-open').disabled=sc.closed_loop;
  $('edit').hidden=!editable;editShown=editable;
}
// the load in force: users, or rate and cap, and the stage they belong to
function loadText(ld){
  var t=ld.users!==null&&ld.rate===null?ld.users+' users':ld.rate!==null?(ld.rate==='inf'?'unpaced':ld.rate+' req/s'):'';
  if(ld.rate!==null&&ld.max_concurrency!==null){t+=', cap '+ld.max_concurrency;}
  return t+(ld.stage?' ('+ld.stage+')':'');
}
function showStats(s){
  var c=s.cicada;
  $('state').textContent=s.state;$('users').textContent=s.user_count;
  $('rps').textContent=fmt(s.current_rps);$('toks').textContent=fmt(c.output_tokens_per_s);
  $('fails').textContent=(100*s.fail_ratio).toFixed(1)+'%';$('workers').textContent=s.worker_count;
  $('scenario').textContent=c.scenario.name||'';$('load').textContent=loadText(c.load)||'…';
  $('stop').hidden=!(s.state==='running'||s.state==='ready');
  fill('stats-table',s.stats.map(function(r){return [r.name,String(r.num_requests),String(r.num_failures),fmt(r.median_response_time),fmt(r.ninetieth_response_time),fmt(r.ninety_ninth_response_time),fmt(r.avg_response_time),fmt(r.min_response_time),fmt(r.max_response_time),fmt(r.current_rps)];}));
  var lat=[];['ttft','tpot','itl','e2el'].forEach(function(m){var v=c.latency[m+'_ms'];lat.push(v?[m.toUpperCase()+' ms',String(v.count),fmt(v.mean),fmt(v.p50),fmt(v.p90),fmt(v.p99)]:[m.toUpperCase()+' ms','0','n/a','n/a','n/a','n/a']);});
  fill('llm-table',lat);
  showVerdict(c.client);showServer(c.server);
  fill('failures-table',s.errors.map(function(e){return [e.name,String(e.occurrences),e.error];}));
  fill('workers-table',s.workers.map(function(w){return [w.id,w.state,String(w.cicada.in_flight),fmt(w.cpu_usage),fmt(w.cicada.peak_rss_bytes/1048576),fmt(w.cicada.worst_stall_ms),fmt(w.cicada.clock_offset_ms),fmt(w.cicada.report_age_s)];}));
  $('start').hidden=s.state!=='ready';
  showEdit(s,c);
  if(s.state==='ready'&&lastState!=='ready'){prefill(c.scenario);}
  lastState=s.state;
}
function prefill(sc){
  var f=$('swarm');
  f.user_count.value=sc.users||'';f.spawn_rate.value=sc.spawn_rate||'';
  f.rate.value=sc.closed_loop?'':(sc.rate||'');f.max_concurrency.value=sc.max_concurrency||'';
  f.host.value=sc.host||'';f.run_time.value=sc.duration||'';
}
function poll(){
  Promise.all([getJSON('stats/requests'),getJSON('stats/history?from='+nextPoint)]).then(function(r){
    showStats(r[0]);
    var h=r[1];points=points.concat(h.points);nextPoint=h.next;marks=h.marks||[];
    drawCharts();polls++;
    var st=$('status');st.textContent='updated '+polls+' time(s), '+points.length+' point(s)';
    st.setAttribute('data-points',String(points.length));st.setAttribute('data-requests',String(r[0].cicada.requests));
    document.body.setAttribute('data-state',r[0].state);
  }).catch(function(e){$('status').textContent='update failed: '+e.message;}).then(function(){setTimeout(poll,1000);});
}
function post(url,body){return fetch(url,{method:'POST',credentials:'same-origin',headers:{'Content-Type':'application/x-www-form-urlencoded'},body:body}).then(function(r){return r.json();});}
// the server's answer, success or refusal, where the form's user sees it
function answer(id){return function(r){var m=$(id);m.textContent=r.message;m.setAttribute('data-ok',String(r.success));};}
function failed(id){return function(e){var m=$(id);m.textContent='not sent: '+e.message;m.setAttribute('data-ok','false');};}
$('stop').addEventListener('click',function(){post('stop','');});
$('swarm').addEventListener('submit',function(ev){ev.preventDefault();
  post('swarm',new URLSearchParams(new FormData($('swarm'))).toString()).then(answer('start-msg'),failed('start-msg'));});
$('steer').addEventListener('submit',function(ev){ev.preventDefault();
  $('edit-msg').textContent='';
  post('swarm',new URLSearchParams(new FormData($('steer'))).toString()).then(answer('edit-msg'),failed('edit-msg'));});
document.querySelectorAll('#tabs a').forEach(function(a){a.addEventListener('click',function(ev){ev.preventDefault();show(a.getAttribute('href').slice(1));});});
function show(id){document.querySelectorAll('.tab').forEach(function(t){t.classList.toggle('on',t.id===id);});document.querySelectorAll('#tabs a').forEach(function(a){a.classList.toggle('on',a.getAttribute('href')==='#'+id);});}
show(location.hash?location.hash.slice(1):'stats');
drawCharts();poll();
})();
