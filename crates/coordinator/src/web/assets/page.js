(function(){
'use strict';
var $=function(id){return document.getElementById(id);};
var points=[], marks=[], nextPoint=0, polls=0, lastState='', editShown=false;
var NS='http://www.w3.org/2000/svg';
var COLORS=['#1f6feb','#e8590c','#2f9e44','#ae3ec9','#c92a2a'];

function el(name,attrs,parent){var e=document.createElementNS(NS,name);for(var k in attrs){e.setAttribute(k,attrs[k]);}if(parent){parent.appendChild(e);}return e;}
function fmt(v){if(v===null||v===undefined){return 'n/a';}var a=Math.abs(v);return a>=1000?v.toFixed(0):a>=10?v.toFixed(1):v.toFixed(2);}
function cell(tr,text,left){var td=document.createElement('td');td.textContent=text;if(left){td.className='l';}tr.appendChild(td);}
function fill(id,rows){var body=document.querySelector('#'+id+' tbody');body.textContent='';rows.forEach(function(r){var tr=document.createElement('tr');r.forEach(function(c,i){cell(tr,c,i===0||(typeof c==='string'&&isNaN(Number(c))&&id!=='stats-table'));});body.appendChild(tr);});}

// one line chart: series = [{name, get(point) -> number|null}]
function chart(id,title,unit,series){
  var W=560,H=260,L=56,R=12,T=30,B=34,box=$(id);
  box.textContent='';
  var svg=el('svg',{'class':'chart',viewBox:'0 0 '+W+' '+H,'data-points':String(points.length)},box);
  el('text',{'class':'title',x:L,y:18},svg).textContent=title+' ('+unit+')';
  var t0=0,t1=1,y1=0;
  if(points.length){t0=Math.min(0,points[0].t-1);t1=Math.max(points[points.length-1].t,t0+1);}
  series.forEach(function(s){points.forEach(function(p){var v=s.get(p);if(v!==null&&v!==undefined&&v>y1){y1=v;}});});
  y1=y1>0?y1*1.1:1;
  var x=function(t){return L+(t-t0)/(t1-t0)*(W-L-R);},y=function(v){return H-B-v/y1*(H-T-B);};
  for(var i=0;i<=4;i++){var v=y1*i/4;el('line',{'class':'grid',x1:L,x2:W-R,y1:y(v),y2:y(v)},svg);el('text',{'class':'tick',x:L-4,y:y(v)+4,'text-anchor':'end'},svg).textContent=fmt(v);}
  for(var j=0;j<=4;j++){var tt=t0+(t1-t0)*j/4;el('text',{'class':'tick',x:x(tt),y:H-B+16,'text-anchor':'middle'},svg).textContent=tt.toFixed(0)+'s';}
  marks.forEach(function(m){if(m.t<t0||m.t>t1){return;}var g=el('g',{'class':'mark','data-mark':m.name},svg);el('line',{'class':'mark',x1:x(m.t),x2:x(m.t),y1:T,y2:H-B},g);el('text',{'class':'tick',x:x(m.t)+3,y:T+12},g).textContent=m.name;});
  var prev=null;points.forEach(function(p){if(prev!==null&&p.step!==prev){el('line',{'class':'step',x1:x(p.t),x2:x(p.t),y1:T,y2:H-B},svg);}prev=p.step;});
  series.forEach(function(s,k){
    var d='',pen=false;
    points.forEach(function(p){var v=s.get(p);if(v===null||v===undefined){pen=false;return;}d+=(pen?'L':'M')+x(p.t).toFixed(1)+' '+y(v).toFixed(1);pen=true;});
    var g=el('g',{'class':'series','data-series':s.name},svg);
    if(d){el('path',{d:d,fill:'none',stroke:COLORS[k%COLORS.length],'stroke-width':1.8},g);}
    el('rect',{x:L+8+k*120,y:T-8,width:10,height:10,fill:COLORS[k%COLORS.length]},svg);
    el('text',{'class':'legend',x:L+22+k*120,y:T+1},svg).textContent=s.name;
  });
}
function ms(name,idx){return function(p){var m=p.ms[name];return m?m[idx]:null;};}
function drawCharts(){
  chart('chart-rps','Requests per second','1/s',[{name:'ok',get:function(p){return p.rps;}},{name:'failed',get:function(p){return p.fail_s;}}]);
  chart('chart-tok','Output tokens per second','tok/s',[{name:'output',get:function(p){return p.tok_s;}}]);
  chart('chart-ttft','TTFT','ms',[{name:'p50',get:ms('ttft',0)},{name:'p99',get:ms('ttft',1)}]);
  chart('chart-tpot','TPOT and ITL','ms',[{name:'TPOT p50',get:ms('tpot',0)},{name:'ITL p50',get:ms('itl',0)},{name:'ITL p99',get:ms('itl',1)}]);
  chart('chart-e2el','E2EL (response time)','ms',[{name:'p50',get:ms('e2el',0)},{name:'p99',get:ms('e2el',1)}]);
  chart('chart-inflight','Requests in flight','',[{name:'in flight',get:function(p){return p.in_flight;}}]);
}

function getJSON(url){return fetch(url,{credentials:'same-origin',cache:'no-store'}).then(function(r){if(!r.ok){throw new Error(url+': HTTP '+r.status);}return r.json();});}

function showStats(s){
  var c=s.cicada;
  $('state').textContent=s.state;$('users').textContent=s.user_count;
  $('rps').textContent=fmt(s.total_rps);$('toks').textContent=fmt(c.output_tokens_per_s);
  $('fails').textContent=(100*s.fail_ratio).toFixed(1)+'%';$('workers').textContent=s.worker_count;
  $('scenario').textContent=c.scenario.name||'';
  $('stop').hidden=!(s.state==='running'||s.state==='ready');
  fill('stats-table',s.stats.map(function(r){return [r.name,String(r.num_requests),String(r.num_failures),fmt(r.median_response_time),fmt(r.ninetieth_response_time),fmt(r.ninety_ninth_response_time),fmt(r.avg_response_time),fmt(r.min_response_time),fmt(r.max_response_time),fmt(r.current_rps)];}));
  var lat=[];['ttft','tpot','itl','e2el'].forEach(function(m){var v=c.latency[m+'_ms'];lat.push(v?[m.toUpperCase()+' ms',String(v.count),fmt(v.mean),fmt(v.p50),fmt(v.p90),fmt(v.p99)]:[m.toUpperCase()+' ms','0','n/a','n/a','n/a','n/a']);});
  fill('llm-table',lat);
  fill('failures-table',s.errors.map(function(e){return [e.name,String(e.occurrences),e.error];}));
  fill('workers-table',s.workers.map(function(w){return [w.id,w.state,String(w.cicada.in_flight),fmt(w.cpu_usage),fmt(w.cicada.peak_rss_bytes/1048576),fmt(w.cicada.worst_stall_ms),fmt(w.cicada.clock_offset_ms),fmt(w.cicada.report_age_s)];}));
  $('start').hidden=s.state!=='ready';
  var editable=s.state==='running'&&c.scenario.closed_loop;
  if(editable&&!editShown){$('steer').user_count.value=c.scenario.users||'';$('steer').spawn_rate.value=c.scenario.spawn_rate||'';}
  $('edit').hidden=!editable;editShown=editable;
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
$('stop').addEventListener('click',function(){post('stop','');});
$('swarm').addEventListener('submit',function(ev){ev.preventDefault();
  var body=new URLSearchParams(new FormData($('swarm'))).toString();
  post('swarm',body).then(function(r){$('start-msg').textContent=r.message;});});
$('steer').addEventListener('submit',function(ev){ev.preventDefault();
  var body=new URLSearchParams(new FormData($('steer'))).toString();
  post('swarm',body).then(function(r){$('edit-msg').textContent=r.message;});});
document.querySelectorAll('#tabs a').forEach(function(a){a.addEventListener('click',function(ev){ev.preventDefault();show(a.getAttribute('href').slice(1));});});
function show(id){document.querySelectorAll('.tab').forEach(function(t){t.classList.toggle('on',t.id===id);});document.querySelectorAll('#tabs a').forEach(function(a){a.classList.toggle('on',a.getAttribute('href')==='#'+id);});}
show(location.hash?location.hash.slice(1):'stats');
drawCharts();poll();
})();
